"""The one partitions definition every layer shares: daily business days in UTC."""

from __future__ import annotations

import os

import dagster as dg

# The product's history starts on 2026-09-17. A deployment that migrates older
# history (or the benchmark's year-long backfill, which needs 365 past days)
# sets ATLASMART_FIRST_SALES_DATE before the code location loads.
FIRST_SALES_DATE = os.environ.get("ATLASMART_FIRST_SALES_DATE", "2026-09-17")

daily_partitions = dg.DailyPartitionsDefinition(start_date=FIRST_SALES_DATE, timezone="UTC")

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
