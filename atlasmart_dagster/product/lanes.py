"""Concurrency lanes: current work and backfill work never queue behind each other.

Runs carry ``atlasmart/lane = current | backfill``. The instance config
(``dagster.yaml``) admits two current runs and one backfill run at a time;
Dagster sets ``dagster/backfill`` on runs it launches for a backfill, so those
count as backfill lane too. A run with neither tag (a manual materialization)
is recorded as lane ``manual``.

The backfill lane repairs history. It may not rewrite the *current* partition
(the newest complete business day) unless the operator names it explicitly
with the tag ``atlasmart/include_current = true``.
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


def lane_of(tags: Mapping[str, str]) -> str:
    if tags.get(LANE_TAG) in (CURRENT, BACKFILL):
        return tags[LANE_TAG]
    if DAGSTER_BACKFILL_TAG in tags:
        return BACKFILL
    return MANUAL


def current_partition(now: datetime) -> str:
    """The newest complete business day at ``now`` (UTC): yesterday."""
    return (now.date() - timedelta(days=1)).isoformat()


def guard_backfill_scope(tags: Mapping[str, str], partitions: Sequence[str], now: datetime) -> None:
    """Refuse a backfill-lane run that would rewrite the current partition unasked."""
    if lane_of(tags) != BACKFILL:
        return
    current = current_partition(now)
    if current in partitions and tags.get(INCLUDE_CURRENT_TAG, "").lower() != "true":
        raise LaneViolation(
            f"backfill lane may not rewrite the current partition {current}; "
            f"name it explicitly with the tag {INCLUDE_CURRENT_TAG}=true (atlasmart backfill --include-current)"
        )

