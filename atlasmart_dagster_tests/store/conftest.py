"""Fixtures of the store tests that damage a loaded home (their helpers are in ``damaged_home``)."""

from __future__ import annotations

import pytest

from atlasmart_dagster_tests.store.damaged_home import EMBEDDED_UNSET


@pytest.fixture
def embedded(monkeypatch) -> None:
    """This test in the embedded deployment, whatever the environment says (see ``EMBEDDED_UNSET``)."""
    for name in EMBEDDED_UNSET:
        monkeypatch.delenv(name, raising=False)
