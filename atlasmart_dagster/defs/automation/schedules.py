"""The daily schedule: at 08:00 UTC, run the previous business day in the current lane."""


from datetime import datetime, timedelta

import dagster as dg

from ...product.lanes import CURRENT, LANE_TAG
from ...store.landing import parse_manifest
from ...store.platform import Platform
from ..resources import AtlasmartResource, skips_when_clock_refused
from .jobs import TRIGGER_TAG, daily_sales_job
from .load_retries import instance_of, unfinished_load

__all__ = ["TRIGGER_TAG", "already_loaded", "daily_sales_schedule", "scheduled_load"]


def already_loaded(platform: Platform, partition: str, instance: dg.DagsterInstance | None = None) -> str | None:
    """Why the day needs no scheduled load (its landed batch was loaded already), or None.

    The landing sensor usually loads a day as soon as its manifest lands, well
    before 08:00; re-running it at 08:00 from the same batch would rebuild and
    re-certify a delivered day for nothing. Only new source data (a batch not
    loaded yet) is a reason to load a loaded day again. A load of the batch
    that never finished (interrupted, or its process gone) is tried again by
    ``landing_manifest_sensor`` (``load_retries.py``); with ``instance`` the
    reason says so.
    """
    loaded = {b["batch_id"] for b in platform.ledger.batches.list(partition)}
    if not loaded:
        return None
    raw = platform.landing.read_manifest_bytes(partition)
    manifest = parse_manifest(raw, partition)[0] if raw is not None else None
    if manifest is not None and manifest.batch_id not in loaded:
        return None
    unfinished = unfinished_load(instance, platform, partition, manifest.batch_id) if (
        instance is not None and manifest is not None) else None
    if unfinished is not None:
        return f"{unfinished.reason}" + (" by landing_manifest_sensor" if unfinished.retry else "")
    return f"{partition} was already loaded from batch {', '.join(sorted(loaded))}; no new source data landed"


@dg.schedule(
    cron_schedule="0 8 * * *",
    execution_timezone="UTC",
    job=daily_sales_job,
    name="daily_sales_schedule",
    description=(
        "08:00 UTC: load yesterday's partition, unless its landed batch was loaded already (by "
        "landing_manifest_sensor). If the ERP manifest is not ready yet, the run records BLOCKED_UPSTREAM and "
        "publishes nothing; landing_manifest_sensor starts the load when it lands, and tries a load that was "
        "interrupted or whose process died again (at most 3 attempts)."
    ),
)
@skips_when_clock_refused
def daily_sales_schedule(context: dg.ScheduleEvaluationContext, atlasmart: AtlasmartResource):
    return scheduled_load(atlasmart.platform, context.scheduled_execution_time, instance_of(context))


def scheduled_load(
    platform: Platform, scheduled_at: datetime, instance: dg.DagsterInstance | None = None
) -> dg.RunRequest | dg.SkipReason:
    """What the 08:00 schedule does at ``scheduled_at`` (also what game days and drills tick)."""
    partition = (scheduled_at - timedelta(days=1)).date().isoformat()
    loaded = already_loaded(platform, partition, instance)
    if loaded:
        return dg.SkipReason(loaded)
    return dg.RunRequest(
        run_key=f"schedule-{partition}",
        partition_key=partition,
        tags={LANE_TAG: CURRENT, TRIGGER_TAG: "schedule"},
    )
