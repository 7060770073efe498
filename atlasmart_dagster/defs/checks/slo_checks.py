"""SLO checks on the certified marts' served assets: per-partition SLO results shown in the Dagster UI.

The figures come from the ledger (see ``product/slo.py``): they are recorded when a
partition is first delivered by the daily load, after its run, so the
certification paths report them to Dagster as runless check evaluations, one
per partition. The checks sit on ``served_mart_*`` (what consumers get), so a
load run of the chain does not run them. Executing them in a run (select a
served asset, *Execute checks*) re-reads the ledger for the run's partitions
and reports one evaluation per partition:

* recorded results as they were recorded (a recorded miss fails);
* the current day awaiting its first delivery: availability measured up to now
  (fails once the deadline has passed); the other objectives are not measured
  yet;
* any other day without recorded results (delivered by a backfill, or not the
  daily load's first delivery) is *not measured*: a WARN failure (a warning,
  never a pass) with the reason. It is not an SLO event, so it is never
  reported as a miss.

In a run the evaluations carry Dagster's ``partition`` field, so they complete
the per-partition rows Dagster planned. Runless evaluations name their day in
the metadata only: Dagster 1.13 indexes check executions by (check, run,
partition) uniquely and runless events share one empty run id, so a second
runless evaluation of the same day would be refused.

Never blocking: an SLO miss is for people to act on, not a reason to withhold
correct data.
"""

from datetime import datetime
from typing import Iterable, Sequence

import dagster as dg

from ...product.lanes import current_partition
from ...product.slo import (
    AVAILABILITY,
    OBJECTIVES,
    TARGETS,
    UNITS,
    SloResult,
    Timeline,
    evaluate,
    latest_results,
    scheduled_at,
)
from ...store.platform import Platform
from ...store.tables import CERTIFIED_ASSETS, CERTIFIED_MARTS
from ..assets.served import served_asset
from ..partitions import daily_partitions
from ..assets.step import Step, partitioned_check_events
from ..resources import AtlasmartResource

# The SLOs describe the delivery of the certified marts to consumers, so their
# checks sit on the marts' served assets: a load run of the chain neither plans
# nor reports them (before certification they have nothing to say).
SLO_PRODUCTS = tuple(CERTIFIED_MARTS)
SLO_ASSETS = tuple(served_asset(product) for product in SLO_PRODUCTS)


def slo_check_name(objective: str) -> str:
    return f"slo_{objective}"


SLO_CHECK_SPECS = [
    dg.AssetCheckSpec(
        slo_check_name(objective),
        asset=asset,
        description=f"Per-partition {objective} SLO of the day's delivery (measured by AtlasMart, not Dagster).",
        # Executed in a run (Execute checks on the served asset), each day is its own row.
        partitions_def=daily_partitions,
    )
    for asset in SLO_ASSETS
    for objective in OBJECTIVES
]
SLO_CHECK_KEYS = [spec.key for spec in SLO_CHECK_SPECS]


def _metadata(result: SloResult) -> dict:
    return {
        "partition": result.partition,
        "measured": True,
        "value": result.value if result.value is not None else "n/a",
        "unit": result.unit,
        "target": result.target,
        "missed_by": result.missed_by if result.missed_by is not None else 0,
        "summary": result.describe(),
        "detail": result.detail,
    }


def slo_check_evaluations(results: Iterable[SloResult], in_run: bool = False) -> list[dg.AssetCheckEvaluation]:
    """Evaluations of the SLO checks; ``in_run`` sets Dagster's ``partition`` field (see the module docstring)."""
    return [
        dg.AssetCheckEvaluation(
            asset_key=dg.AssetKey(asset),
            check_name=slo_check_name(r.objective),
            passed=r.met,
            severity=dg.AssetCheckSeverity.WARN,
            metadata=_metadata(r),
            description=f"{r.partition} {r.describe()}",
            blocking=False,
            partition=r.partition if in_run else None,
        )
        for r in results
        for asset in SLO_ASSETS
    ]


def not_measured_evaluations(partition: str, objectives: Sequence[str], reason: str) -> list[dg.AssetCheckEvaluation]:
    """Objectives a day is not measured on: a WARN with the reason, never a pass and never a miss.

    Not a pass: a green "Passed" for a day nobody measured would be a green
    light that says nothing. A WARN failure shows as a warning in the UI and
    blocks nothing.
    """
    return [
        dg.AssetCheckEvaluation(
            asset_key=dg.AssetKey(asset),
            check_name=slo_check_name(objective),
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "partition": partition,
                "measured": False,
                "not_measured_reason": reason,
                "value": "n/a",
                "unit": UNITS[objective],
                "target": TARGETS[objective],
            },
            description=f"{partition} NOT MEASURED ({objective}): {reason}",
            blocking=False,
            partition=partition,  # only ever evaluated in a run
        )
        for objective in objectives
        for asset in SLO_ASSETS
    ]


def partition_slo_evaluations(platform: Platform, partition: str, now: datetime) -> list[dg.AssetCheckEvaluation]:
    """Where one day stands against its SLOs at ``now``, as evaluations of the marts' SLO checks."""
    recorded = latest_results(platform.ledger, partition)
    if recorded:
        unrecorded = [o for o in OBJECTIVES if o not in {r.objective for r in recorded}]
        if unrecorded and all(r.objective == AVAILABILITY for r in recorded):
            # only the undelivered-availability miss is recorded; the rest waits for the delivery
            reason = "not delivered yet; measured on the day's first delivery"
        else:
            reason = "not measurable for this delivery"
        return slo_check_evaluations(recorded, in_run=True) + not_measured_evaluations(partition, unrecorded, reason)
    served = [platform.ledger.partitions.served(asset, partition) for asset in CERTIFIED_ASSETS]
    delivered = all(served)
    if partition == current_partition(now) and not delivered:
        # Awaiting its first delivery: how late it already is, measured up to now.
        timeline = Timeline(partition, None, scheduled_at(partition), None, None, now, None, None)
        availability = [r for r in evaluate(timeline) if r.objective == AVAILABILITY]
        others = [o for o in OBJECTIVES if o != AVAILABILITY]
        return slo_check_evaluations(availability, in_run=True) + not_measured_evaluations(
            partition, others, "not delivered yet; measured on the day's first delivery"
        )
    if delivered:
        lanes = sorted({s.certification.lane or "unknown" for s in served})
        reason = (
            f"delivered by a backfill (certified from a {'/'.join(lanes)}-lane run), not the daily load's "
            "first delivery: not an SLO event"
        )
    else:
        reason = (
            "not delivered, and not the current day awaiting its first delivery: not an SLO event "
            "(a day the daily load owes and misses is recorded as a miss by incident detection)"
        )
    return not_measured_evaluations(partition, OBJECTIVES, reason)


def report_recorded_slos(instance: dg.DagsterInstance, platform: Platform, partitions: Iterable[str]) -> None:
    """Show the recorded SLO results of ``partitions`` as runless evaluations of the marts' SLO checks.

    Days without recorded results (history, not delivered yet) report nothing
    here: a run that includes the checks says "not measured" for them.
    Re-reporting a delivered day after a reload keeps its SLO state the newest
    evaluation, so the UI does not read "Not evaluated" against the reload's
    materialization.
    """
    for partition in partitions:
        for evaluation in slo_check_evaluations(latest_results(platform.ledger, partition)):
            instance.report_runless_asset_event(evaluation)


@dg.multi_asset_check(
    specs=SLO_CHECK_SPECS,
    name="partition_slos",
    description="Per-partition SLOs of the marts' daily delivery, as recorded in the ledger (never blocking).",
)
def partition_slos(context: dg.AssetCheckExecutionContext, atlasmart: AtlasmartResource):
    step = Step(context, atlasmart, SLO_ASSETS[0])
    now = step.now()
    evaluations = [e for partition in step.partitions for e in partition_slo_evaluations(step.platform, partition, now)]
    output_names = {spec.key: spec.get_python_identifier() for spec in SLO_CHECK_SPECS}
    yield from partitioned_check_events(output_names, context.selected_asset_check_keys, evaluations)
