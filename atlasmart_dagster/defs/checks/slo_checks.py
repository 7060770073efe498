"""SLO checks on the certified marts: per-partition SLO results shown in the Dagster UI.

The figures come from the ledger (see ``product/slo.py``): they are recorded when a
partition is first delivered, after its run, so the certification gate reports
them to Dagster as runless check evaluations. Executing the checks in a run
re-reads the ledger for the run's partitions; a partition not yet certified is
measured up to now (how late it already is). Never blocking: an SLO miss is
for people to act on, not a reason to withhold correct data.
"""

from typing import Iterable

import dagster as dg

from ...product.slo import OBJECTIVES, SloResult, Timeline, evaluate, latest_results, scheduled_at
from ..assets.step import Step
from ..resources import AtlasmartResource

SLO_ASSETS = ("mart_finance_daily_sales", "mart_executive_revenue")


def slo_check_name(objective: str) -> str:
    return f"slo_{objective}"


SLO_CHECK_SPECS = [
    dg.AssetCheckSpec(
        slo_check_name(objective),
        asset=asset,
        description=f"Per-partition {objective} SLO of the day's delivery (measured by AtlasMart, not Dagster).",
    )
    for asset in SLO_ASSETS
    for objective in OBJECTIVES
]
SLO_CHECK_KEYS = [spec.key for spec in SLO_CHECK_SPECS]


def _metadata(result: SloResult) -> dict:
    return {
        "partition": result.partition,
        "value": result.value if result.value is not None else "n/a",
        "unit": result.unit,
        "target": result.target,
        "missed_by": result.missed_by if result.missed_by is not None else 0,
        "summary": result.describe(),
        "detail": result.detail,
    }


def slo_check_evaluations(results: Iterable[SloResult]) -> list[dg.AssetCheckEvaluation]:
    return [
        dg.AssetCheckEvaluation(
            asset_key=dg.AssetKey(asset),
            check_name=slo_check_name(r.objective),
            passed=r.met,
            severity=dg.AssetCheckSeverity.WARN,
            metadata=_metadata(r),
            description=r.describe(),
        )
        for r in results
        for asset in SLO_ASSETS
    ]


def report_slo_checks(instance: dg.DagsterInstance, results: Iterable[SloResult]) -> None:
    """Show SLO results as evaluations of the marts' SLO checks in the Dagster UI."""
    for evaluation in slo_check_evaluations(results):
        instance.report_runless_asset_event(evaluation)


def slo_reporter(instance: dg.DagsterInstance | None):
    """``report_slos`` for ``certify_run``: report to ``instance`` (nothing without one)."""
    return None if instance is None else (lambda results: report_slo_checks(instance, results))


@dg.multi_asset_check(specs=SLO_CHECK_SPECS, name="partition_slos")
def partition_slos(context: dg.AssetCheckExecutionContext, atlasmart: AtlasmartResource):
    step = Step(context, atlasmart, SLO_ASSETS[0])
    now = step.now()
    by_objective: dict[str, list[SloResult]] = {o: [] for o in OBJECTIVES}
    for partition in step.partitions:
        results = latest_results(step.ledger, partition)
        if not results:  # not delivered yet: how it stands now
            results = evaluate(Timeline(partition, None, scheduled_at(partition), None, None, now, None, None))
        for r in results:
            by_objective[r.objective].append(r)
    for asset in SLO_ASSETS:
        for objective, results in by_objective.items():
            missed = [r for r in results if not r.met]
            yield dg.AssetCheckResult(
                asset_key=dg.AssetKey(asset),
                check_name=slo_check_name(objective),
                passed=not missed,
                severity=dg.AssetCheckSeverity.WARN,
                metadata={
                    "partitions": len(results),
                    "results": dg.MetadataValue.json({r.partition: r.to_json() for r in results[:20]}),
                    "missed": ", ".join(f"{r.partition}: {r.describe()}" for r in missed[:10]) or "none",
                },
            )
