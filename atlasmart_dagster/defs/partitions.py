"""The one partitions definition every layer shares: daily business days in UTC."""

from __future__ import annotations

import os
from datetime import date, timedelta

import dagster as dg

from .first_sales_date import first_sales_date
from .last_sales_date import LAST_SALES_DATE_ENV, last_sales_date

# The product's history starts on 2026-09-17, the bundled sample's first day. A
# deployment that migrates older history (or the benchmark's year-long
# backfill, which needs 365 past days) sets ATLASMART_FIRST_SALES_DATE before
# the code location loads: read at import, because the partitions definition
# is built from it.
FIRST_SALES_DATE = first_sales_date()
# The last partition: unset, the newest day ended by the system clock, as
# Dagster ends a daily definition; a landing zone that ends (the bundled
# sample) sets ATLASMART_LAST_SALES_DATE (last_sales_date.py). Read at import
# for the same reason.
LAST_SALES_DATE = last_sales_date(FIRST_SALES_DATE)


def _day_after(day: str) -> str:
    return (date.fromisoformat(day) + timedelta(days=1)).isoformat()


daily_partitions = dg.DailyPartitionsDefinition(
    start_date=FIRST_SALES_DATE,
    end_date=_day_after(LAST_SALES_DATE) if LAST_SALES_DATE else None,  # Dagster's end excludes its day
    timezone="UTC",
)


def partitions_span() -> str:
    """Which days are partitions, in words: from the first to yesterday (UTC), or to the day the setting names."""
    if LAST_SALES_DATE:
        return f"the days from {FIRST_SALES_DATE} to {LAST_SALES_DATE} (${LAST_SALES_DATE_ENV})"
    return f"the days from {FIRST_SALES_DATE} to yesterday, UTC (a day becomes a partition once it has ended)"

# How a range backfill becomes runs. One run for the whole range (the default:
# set-based SQL over the range is the fast path on one machine). A team
# deployment with workers sets ATLASMART_BACKFILL_RUN_DAYS=N: the daemon then
# splits a range into runs of N days that the run queue can start side by side
# (up to the backfill lane's limit) and whose steps spread over the workers.
BACKFILL_RUN_DAYS_ENV = "ATLASMART_BACKFILL_RUN_DAYS"


def backfill_policy() -> dg.BackfillPolicy:
    days = os.environ.get(BACKFILL_RUN_DAYS_ENV)
    if not days:
        return dg.BackfillPolicy.single_run()
    if not days.isdigit() or int(days) < 1:
        raise ValueError(f"${BACKFILL_RUN_DAYS_ENV} must be a whole number of days (>= 1), not {days!r}")
    return dg.BackfillPolicy.multi_run(int(days))


BACKFILL_POLICY = backfill_policy()

RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
PARTITION_TAG = "dagster/partition"


def partition_keys_from_tags(tags: dict[str, str]) -> list[str]:
    """The partitions a run targets, from its tags (single key or range)."""
    if PARTITION_TAG in tags:
        return [tags[PARTITION_TAG]]
    if RANGE_START_TAG in tags and RANGE_END_TAG in tags:
        return list(
            daily_partitions.get_partition_keys_in_range(dg.PartitionKeyRange(tags[RANGE_START_TAG], tags[RANGE_END_TAG]))
        )
    return []


def range_tags(start: str, end: str) -> dict[str, str]:
    return {RANGE_START_TAG: start, RANGE_END_TAG: end}
