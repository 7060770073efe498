"""Concurrency lanes: current work and backfill work never queue behind each other.

A run's lane is derived from what the run is, never from the job that made it:

* a run Dagster creates for a backfill (it carries ``dagster/backfill``, from
  the UI's *Launch backfill* on the asset graph or on a job page, or from the
  daemon) is **backfill** lane, whatever other tags it inherited;
* otherwise the ``atlasmart/lane`` tag decides: the daily schedule and the
  sensors put ``current`` (the current day's first delivery) or ``backfill``
  (a restatement) on their requests, ``atlasmart backfill`` puts ``backfill``,
  and ``backfill_sales_job`` carries ``backfill`` itself;
* a run with neither tag (a manual launch from the UI or ``dagster asset
  materialize``) is judged by its partitions when the time is known: the
  current day alone is current work, any other day or a range is backfill
  work; without a time it is recorded as ``manual``.

``daily_sales_job`` therefore carries no lane tag: a job tag lands on every
run the job makes, including the runs of a backfill launched from its page.

The instance config (``dagster.yaml`` ``tag_concurrency_limits``) admits two
``atlasmart/lane=current`` runs, one ``atlasmart/lane=backfill`` run and one
``dagster/backfill`` run at a time; a backfill run counts only against the
backfill limits because nothing stamps it ``current``.

The backfill lane repairs history. It may not rewrite the *current* partition
(the newest complete business day) unless the operator names it explicitly
with the tag ``atlasmart/include_current = true``. The guard applies to every
run whose lane is backfill, however it was launched.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Mapping, Sequence

from ..errors import LaneViolation

LANE_TAG = "atlasmart/lane"
CURRENT = "current"
BACKFILL = "backfill"
MANUAL = "manual"
DAGSTER_BACKFILL_TAG = "dagster/backfill"
INCLUDE_CURRENT_TAG = "atlasmart/include_current"

# Dagster's partition tags (the same names defs/partitions.py reads; repeated
# here because this layer may not import defs).
_PARTITION_TAG = "dagster/partition"
_RANGE_START_TAG = "dagster/asset_partition_range_start"
_RANGE_END_TAG = "dagster/asset_partition_range_end"


def current_partition(now: datetime) -> str:
    """The newest complete business day at ``now`` (UTC): yesterday."""
    return (now.date() - timedelta(days=1)).isoformat()


def lane_for_partitions(partitions: Sequence[str], now: datetime) -> str:
    """The lane of work on ``partitions`` at ``now``: the current day alone is current, anything else backfill."""
    return CURRENT if list(partitions) == [current_partition(now)] else BACKFILL


def _partitions_in_tags(tags: Mapping[str, str]) -> list[str] | None:
    """The single partition, or the range's ends (enough to tell "the current day alone"); None if unpartitioned."""
    if _PARTITION_TAG in tags:
        return [tags[_PARTITION_TAG]]
    if _RANGE_START_TAG in tags and _RANGE_END_TAG in tags:
        start, end = tags[_RANGE_START_TAG], tags[_RANGE_END_TAG]
        return [start] if start == end else [start, end]
    return None


def lane_of(tags: Mapping[str, str], now: datetime | None = None) -> str:
    """The lane of a run, from what it is (see the module docstring); ``now`` lets an untagged run be judged."""
    if DAGSTER_BACKFILL_TAG in tags:
        return BACKFILL
    if tags.get(LANE_TAG) in (CURRENT, BACKFILL):
        return tags[LANE_TAG]
    partitions = _partitions_in_tags(tags)
    if now is None or partitions is None:
        return MANUAL
    return lane_for_partitions(partitions, now)


def guard_backfill_scope(tags: Mapping[str, str], partitions: Sequence[str], now: datetime) -> None:
    """Refuse a backfill-lane run that would rewrite the current partition unasked."""
    lane = lane_of(tags)
    if lane == MANUAL and partitions:
        lane = lane_for_partitions(partitions, now)
    if lane != BACKFILL:
        return
    current = current_partition(now)
    if current in partitions and tags.get(INCLUDE_CURRENT_TAG, "").lower() != "true":
        raise LaneViolation(
            f"backfill lane may not rewrite the current partition {current}; "
            f"name it explicitly with the tag {INCLUDE_CURRENT_TAG}=true (atlasmart backfill --include-current)"
        )
