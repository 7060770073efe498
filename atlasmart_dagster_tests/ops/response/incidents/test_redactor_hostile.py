"""The free-text redactor is linear in its input and catches addresses in any script."""

import time

import pytest

from atlasmart_dagster.product.pii import REDACTED, redact


def _seconds(text: str, repeats: int = 5) -> float:
    """The fastest of a few calls: a busy machine (a parallel test run) only ever makes a call slower."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        redact(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("unit", ["x", "a.", "a@", "a@b.", "é"])
def test_redact_is_linear(unit):
    small, large = _seconds(unit * 30_000), _seconds(unit * 120_000)
    assert large < 1.0
    assert large < max(small, 0.005) * 12  # 4x the text, far less than the 16x a quadratic scan would cost


@pytest.mark.parametrize("address", ["josé@example.com", "kim@bücher.example", "kim@xn--bcher-kva.example",
                                     "ana@example.xn--p1ai", "plain.name+tag@example.co.uk"])
def test_unicode_and_idn_addresses_are_redacted(address):
    assert redact(f"write to {address}, please") == f"write to {REDACTED}, please"


@pytest.mark.parametrize("text", ["version 1.2@3.4", "user@localhost", "see @channel"])
def test_what_is_not_an_address_stays(text):
    assert redact(text) == text
