"""The setting ``ATLASMART_FIRST_SALES_DATE``: the first daily partition, read and checked without loading Dagster.

The partitions definition is built from it when the code location loads
(``partitions.py``); the command line checks it before any command runs, so a
malformed or out-of-range value is one line naming the setting, not an error
deep inside Dagster. Its form is declared with the other settings
(``atlasmart_dagster/settings.py``).
"""

from __future__ import annotations

from ..settings import Settings, current, is_iso_day

FIRST_SALES_DATE_ENV = Settings.first_sales_date.name

__all__ = ["FIRST_SALES_DATE_ENV", "first_sales_date", "first_sales_date_problem", "is_iso_day"]


def first_sales_date_problem(value: str | None) -> str | None:
    """Why ``value`` cannot be the first partition (not YYYY-MM-DD, before 2000-01-01, after today UTC), or None."""
    return Settings.first_sales_date.problem({} if value is None else {FIRST_SALES_DATE_ENV: value})


def first_sales_date() -> str:
    """The first daily partition: ``$ATLASMART_FIRST_SALES_DATE``, else 2026-09-17; a bad value raises UsageError."""
    return current().first_sales_date
