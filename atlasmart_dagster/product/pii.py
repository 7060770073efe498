"""PII discipline: customer names and emails never leave the customer dimension.

Everything we render for people outside the data platform (notices, incident
records of consumer reports, error texts shown to consumers) passes through
``redact``: the customer dimension's names and emails, and anything shaped
like an email address, are replaced before the text is stored or shown.
"""

from __future__ import annotations

import re

from ..store.platform import Platform
from ..store.tables import DIM_CUSTOMER

PII_COLUMNS = ("full_name", "email")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
REDACTED = "[redacted]"


def pii_values(platform: Platform) -> tuple[str, ...]:
    """Every PII value in the current customer dimension (empty if it was never loaded)."""
    if platform.warehouse.existing(DIM_CUSTOMER) is None:
        return ()
    table = platform.warehouse.read(DIM_CUSTOMER)
    values = {v for column in PII_COLUMNS for v in table.column(column).to_pylist() if v}
    return tuple(sorted(values, key=len, reverse=True))


def redact(text: str, values: tuple[str, ...] = ()) -> str:
    for value in values:
        text = text.replace(value, REDACTED)
    return _EMAIL.sub(REDACTED, text)


def redact_for(platform: Platform):
    values = pii_values(platform)
    return lambda text: redact(text, values)
