"""The receivers every notification test may use, started per test and stopped after it."""

import pytest

from .receivers import HttpReceiver, SmtpReceiver


@pytest.fixture
def http():
    receiver = HttpReceiver()
    yield receiver
    receiver.close()


@pytest.fixture
def smtp():
    receiver = SmtpReceiver()
    yield receiver
    receiver.close()
