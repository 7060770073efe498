"""The landing sensor: start loads when sources are ready.

Certification after runs is ``certification_sensor.py``; the incident sensor
lives with the incident workflow (``ops/response/incident_tick.py``).
"""

import os
from datetime import date, timedelta

import dagster as dg

from ...product.lanes import BACKFILL, CURRENT, LANE_TAG, current_partition
from ...store.landing import parse_manifest
from ...store.ledger.partition_states import RESTATEMENT_PENDING
from ...store.platform import Platform
from ...store.raw_store import MANIFEST_NAME
from ...store.tables import CERTIFIED_ASSETS
from ..checks.certification_checks import report_day_states
from ..partitions import FIRST_SALES_DATE, LAST_SALES_DATE
from ..resources import AtlasmartResource, skips_when_clock_refused
from .jobs import TRIGGER_TAG, backfill_sales_job, daily_sales_job
from .load_retries import ATTEMPT_TAG, RETRY_OF_TAG, instance_of, phases_by_day, unfinished_load

RESTATES_BATCH_TAG = "atlasmart/restates_batch"


def plan_manifest_runs(
    platform: Platform, instance: dg.DagsterInstance | None = None
) -> tuple[list[dg.RunRequest], list[str]]:
    """Run requests for ready batches the platform has not loaded, and why other days are skipped.

    With ``instance``, a known batch whose automated load never finished is
    requested again, up to ``MAX_LOAD_ATTEMPTS`` attempts (``load_retries.py``).
    """
    now = platform.clock.now()
    current = current_partition(now)
    batches = platform.ledger.batches.list()
    known = {b["batch_id"] for b in batches}
    phases = phases_by_day(platform) if instance is not None and known else {}
    requests, skipped = [], []
    states = None  # the certified products' days, read once per tick when a ready batch needs them
    for partition in platform.landing.partitions():
        if partition < FIRST_SALES_DATE or partition > current:
            skipped.append(f"{partition}: outside the partitions that exist now (first {FIRST_SALES_DATE}, current {current})")
            continue
        if LAST_SALES_DATE and partition > LAST_SALES_DATE:
            skipped.append(f"{partition}: after the last partition {LAST_SALES_DATE} ($ATLASMART_LAST_SALES_DATE)")
            continue
        raw = platform.landing.read_manifest_bytes(partition)
        if raw is None:
            if os.path.lexists(platform.landing.manifest_path(partition)):  # a link, a pipe: never read
                refused = platform.landing.file_problem(partition, MANIFEST_NAME)
                skipped.append(f"{partition}: manifest unusable ({refused})")
            else:
                skipped.append(f"{partition}: manifest not landed yet")
            continue
        manifest, problems = parse_manifest(raw, partition)
        if manifest is None:
            skipped.append(f"{partition}: manifest unusable ({'; '.join(problems)})")
            continue
        if manifest.ready_at > now:
            skipped.append(f"{partition}: manifest declares ready_at {manifest.ready_at.isoformat()} (in the future)")
            continue
        run_key, retry_tags = manifest.batch_id, {}
        if manifest.batch_id in known:
            unfinished = unfinished_load(instance, platform, partition, manifest.batch_id, batches,
                                         phases.get(partition, [])) if instance is not None else None
            if unfinished is None:
                continue  # loaded (or an operator's load): only new source data loads the day again
            if not unfinished.retry:
                skipped.append(unfinished.reason)
                continue
            # A run key of its own: the daemon starts a sensor's run key once.
            run_key = f"{manifest.batch_id}:attempt-{unfinished.next_attempt}"
            retry_tags = {RETRY_OF_TAG: manifest.batch_id, ATTEMPT_TAG: str(unfinished.next_attempt)}
        states = states or platform.ledger.partitions.states(assets=CERTIFIED_ASSETS)
        certified = any(states.served(asset, partition) for asset in CERTIFIED_ASSETS)
        lane = CURRENT if (partition == current and not certified) else BACKFILL
        tags = {LANE_TAG: lane, TRIGGER_TAG: "landing_manifest_sensor", **retry_tags}
        if certified:
            tags[RESTATES_BATCH_TAG] = manifest.batch_id
            pending = [e for a in CERTIFIED_ASSETS for e in states.get(a, partition).of(RESTATEMENT_PENDING)]
            if not any(e.detail.get("batch_id") == manifest.batch_id for e in pending):
                for asset in CERTIFIED_ASSETS:
                    platform.ledger.partitions.append(
                        asset,
                        partition,
                        RESTATEMENT_PENDING,
                        now,
                        actor="landing_manifest_sensor",
                        lane=BACKFILL,
                        reason=f"new batch {manifest.batch_id} for an already certified day",
                        detail={"batch_id": manifest.batch_id, "source_seq_high": manifest.source_seq_high},
                    )
        requests.append(
            dg.RunRequest(
                run_key=run_key,
                partition_key=partition,
                job_name=(daily_sales_job if lane == CURRENT else backfill_sales_job).name,
                tags=tags,
            )
        )
    return requests, skipped


@dg.sensor(
    name="landing_manifest_sensor",
    jobs=[daily_sales_job, backfill_sales_job],
    minimum_interval_seconds=60,
    description=(
        "Starts a load for every day whose ERP manifest has landed and is ready, once per batch_id, and again "
        "(at most 3 attempts) when that load was interrupted or its process died before it finished. "
        "The current day runs in the current lane; a new batch for an already certified day is marked "
        "RESTATEMENT_PENDING and rebuilt in the backfill lane. Skips say which days wait and why."
    ),
)
@skips_when_clock_refused
def landing_manifest_sensor(context: dg.SensorEvaluationContext, atlasmart: AtlasmartResource):
    requests, skipped = plan_manifest_runs(atlasmart.platform, instance_of(context))
    restated = {r.partition_key for r in requests if RESTATES_BATCH_TAG in r.tags}
    if restated:  # the days just marked RESTATEMENT_PENDING show it on their certification_state check
        report_day_states(context.instance, atlasmart.platform, restated)
    if requests:
        return dg.SensorResult(run_requests=requests)
    return dg.SkipReason(skip_reason(atlasmart.platform, skipped))


# How many skipped days a skip reason lists (the newest; the count says how many more).
_SKIPS_LISTED = 5


def skip_reason(platform: Platform, skipped: list[str]) -> str:
    """What the landing zone holds and what the sensor waits for, when it requests nothing.

    E.g. "all 5 landed batches already loaded; waiting for 2026-09-22", then
    the days skipped and why.
    """
    current = current_partition(platform.clock.now())
    loaded_ids = {b["batch_id"] for b in platform.ledger.batches.list()}
    partitions = platform.landing.partitions()
    landed = loaded = 0
    for partition in partitions:
        raw = platform.landing.read_manifest_bytes(partition)
        manifest = parse_manifest(raw, partition)[0] if raw is not None else None
        if manifest is not None:
            landed += 1
            loaded += manifest.batch_id in loaded_ids
    if not partitions:
        held = "landing zone empty"
    elif landed == 0:
        held = "no landed day has a usable manifest"
    elif loaded == landed:
        held = f"all {landed} landed batch{'es' if landed != 1 else ''} already loaded"
    else:
        held = f"{loaded} of {landed} landed batches already loaded"
    # The current day is awaited until one of its batches is loaded; then the next day is.
    current_loaded = bool(platform.ledger.batches.list(current))
    waiting = (date.fromisoformat(current) + timedelta(days=1)).isoformat() if current_loaded else current
    reason = f"{held}; waiting for {waiting}"
    if skipped:
        shown = skipped[-_SKIPS_LISTED:]
        more = f" (and {len(skipped) - len(shown)} more)" if len(skipped) > len(shown) else ""
        reason += f"; skipped {len(skipped)} day{'s' if len(skipped) != 1 else ''}{more}: " + "; ".join(shown)
    return reason
