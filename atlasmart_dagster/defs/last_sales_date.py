"""The setting ``ATLASMART_LAST_SALES_DATE``: the last daily partition of a landing zone that ends, read and checked
without loading Dagster.

Unset (the default), the partitions end where Dagster ends a daily partitions
definition: the newest day that has ended by the system clock (yesterday,
UTC). A live deployment needs that: a day becomes a partition once it has
ended, and the schedule loads it the next morning. A landing zone that ends
(the bundled sample's last day is 2026-09-21; a training or archived home)
sets its last day, so the asset's *Partitions* tab lists its days only, not
every day since as *Missing*. ``scripts/dev demo`` and ``scripts/dev ui`` set
it to the sample's last day when they run on the bundled sample.

Like the first partition it shapes the definitions, so it is read when the
code location loads (``partitions.py``) and must be the same for every
process; the command line checks it before any command runs.
"""

from __future__ import annotations

import os

from .first_sales_date import is_iso_day

LAST_SALES_DATE_ENV = "ATLASMART_LAST_SALES_DATE"
# The bundled sample's last landed day (sample_data/landing); scripts/dev names it too, and a test checks both.
SAMPLE_LAST_SALES_DATE = "2026-09-21"


def last_sales_date_problem(value: str | None, first: str) -> str | None:
    """Why ``value`` cannot be the last partition (not YYYY-MM-DD, before the first partition ``first``), or None."""
    if not value:
        return None  # unset (or set empty): the partitions follow the system clock
    if not is_iso_day(value):
        return (f"${LAST_SALES_DATE_ENV} is {value!r}, not a date: "
                f"expected a day YYYY-MM-DD from {first} (the first partition)")
    if value < first:
        return f"${LAST_SALES_DATE_ENV} is {value}, before the first partition {first}"
    return None


def last_sales_date(first: str) -> str | None:
    """The last daily partition, ``$ATLASMART_LAST_SALES_DATE``, or None (the system clock's yesterday); a bad value
    raises ValueError."""
    value = os.environ.get(LAST_SALES_DATE_ENV)
    problem = last_sales_date_problem(value, first)
    if problem:
        raise ValueError(problem)
    return value or None
