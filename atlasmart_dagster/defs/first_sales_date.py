"""The setting ``ATLASMART_FIRST_SALES_DATE``: the first daily partition, read and checked without loading Dagster.

The partitions definition is built from it when the code location loads
(``partitions.py``); the command line checks it before any command runs, so a
malformed or out-of-range value is one line naming the setting, not an error
deep inside Dagster.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, date, datetime

FIRST_SALES_DATE_ENV = "ATLASMART_FIRST_SALES_DATE"
DEFAULT_FIRST_SALES_DATE = "2026-09-17"
# The earliest history a deployment may migrate: older days are not sales this product ever held.
EARLIEST_FIRST_SALES_DATE = "2000-01-01"

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def is_iso_day(text: str) -> bool:
    """Whether ``text`` is a calendar day written YYYY-MM-DD (the form of every partition key and date option)."""
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return bool(_ISO_DATE.fullmatch(text))


def first_sales_date_problem(value: str | None) -> str | None:
    """Why ``value`` cannot be the first partition (not YYYY-MM-DD, before 2000-01-01, after today UTC), or None."""
    if not value:
        return None  # unset (or set empty): the default
    today = datetime.now(UTC).date().isoformat()
    accepted = f"expected a day YYYY-MM-DD from {EARLIEST_FIRST_SALES_DATE} to {today} (today, UTC)"
    if not is_iso_day(value):
        return f"${FIRST_SALES_DATE_ENV} is {value!r}, not a date: {accepted}"
    if not EARLIEST_FIRST_SALES_DATE <= value <= today:
        return f"${FIRST_SALES_DATE_ENV} is {value}, out of range: {accepted}"
    return None


def first_sales_date() -> str:
    """The first daily partition: ``$ATLASMART_FIRST_SALES_DATE``, else 2026-09-17; a bad value raises ValueError."""
    value = os.environ.get(FIRST_SALES_DATE_ENV)
    problem = first_sales_date_problem(value)
    if problem:
        raise ValueError(problem)
    return value or DEFAULT_FIRST_SALES_DATE
