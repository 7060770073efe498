"""Certification state in the Dagster UI: what consumers are served, per certified product and day.

Each certified product (``store/tables.py`` ``CERTIFIED_ASSETS``) has a served
asset (``served_<product>``, ``defs/assets/served.py``) whose partitions are
materialized exactly for the days consumers are served. Its non-blocking check
``certification_state`` says, day by day and with why, ``CERTIFIED vN``,
``RESTATEMENT_PENDING``, ``RESTATEMENT_HELD``, ``ANOMALY_HELD``, ``DELAYED`` (and why),
``WITHDRAWN`` or ``PENDING``, with the served version, when it was certified
and its fingerprint (``product/serving.py`` ``partition_statuses``). Whenever a
certification path has decided days it calls ``report_day_states``, which
reports one evaluation per product and day as a runless event. An evaluation
passes when consumers are served a certified version of the day.

The check sits on the served asset, not on the product, so a load run of the
chain (the job page, the asset graph, ``dagster asset materialize``) neither
plans nor reports it: it has nothing to say before certification, and it cost
a Dagster event per product and day of every range run.

Runless evaluations name their day in the metadata (``partition``) and the
description, not in Dagster's ``partition`` field: Dagster 1.13 keeps one
row per (check, run, partition) in its check-execution index, and every
runless event has the same empty run id, so a second runless evaluation of
the same day (the day's next state) would be refused by a unique constraint.

The check is also executable (Dagster only lists checks it has definitions
for): selecting a served asset and executing its checks reports each day of
the run as things stand, with Dagster's ``partition`` set.
"""

from typing import Iterable, Sequence

import dagster as dg

from ...product.serving import ANOMALY, HELD, AssetState, PartitionStatus, known_partitions, partition_statuses
from ...store.ledger.partition_states import CERTIFICATION_REFUSED, CERTIFIED, RESTATEMENT_PENDING, WITHDRAWN
from ...store.platform import Platform
from ...store.tables import CERTIFIED_ASSETS
from ..assets.served import product_of, served_asset, sync_served_partitions
from ..assets.step import Step, partitioned_check_events
from ..partitions import daily_partitions
from .slo_checks import report_recorded_slos
from ..resources import AtlasmartResource

CERTIFICATION_STATE = "certification_state"
DELAYED = "DELAYED"
# Day states in which consumers are served a certified version.
SERVED_STATES = (CERTIFIED, RESTATEMENT_PENDING, HELD)
# Day states in which consumers are served nothing they should use.
ERROR_STATES = (DELAYED, WITHDRAWN, ANOMALY)

CERTIFICATION_SPECS = [
    dg.AssetCheckSpec(
        CERTIFICATION_STATE,
        asset=served_asset(product),
        description=(
            "What consumers are served for each day: CERTIFIED vN, RESTATEMENT_PENDING, RESTATEMENT_HELD, ANOMALY_HELD, "
            "DELAYED (and why), WITHDRAWN or PENDING. Reported per partition when certification decides a day; "
            "passes when the day is served certified. Never blocking."
        ),
        blocking=False,
        partitions_def=daily_partitions,  # executed in a run, each day is its own row
    )
    for product in CERTIFIED_ASSETS
]
CERTIFICATION_CHECK_KEYS = [spec.key for spec in CERTIFICATION_SPECS]


def _last_refusal(platform: Platform, asset_state: AssetState, partition: str) -> str | None:
    """Why the newest build of the day was refused, if that refusal is newer than the served certification."""
    served_id = asset_state.served.certification.id if asset_state.served else 0
    refusals = platform.ledger.partitions.events(
        asset=asset_state.asset, partition=partition, states=(CERTIFICATION_REFUSED,)
    )
    newer = [e for e in refusals if e.id > served_id]
    return newer[-1].reason if newer else None


def state_evaluation(
    platform: Platform,
    status: PartitionStatus,
    asset_state: AssetState,
    in_run: bool = False,
) -> dg.AssetCheckEvaluation:
    """The ``certification_state`` evaluation of one asset for one day.

    ``in_run`` sets Dagster's ``partition`` field (see the module docstring).
    """
    served = asset_state.served
    cert = served.certification if served else None
    passed = served is not None and status.state in SERVED_STATES
    state = status.state
    label = f"{state} v{served.version}" if passed and state == CERTIFIED else state
    if passed and state != CERTIFIED:
        label = f"{state} (serving v{served.version})"
    detail = status.detail
    refused = None if passed else _last_refusal(platform, asset_state, status.partition)
    if refused:
        detail = f"{detail}; certification refused: {refused}"
    metadata = {
        "partition": status.partition,
        "state": state,
        "version": served.version if served else dg.MetadataValue.null(),
        "certified_at": served.certified_at if served else dg.MetadataValue.null(),
        "fingerprint": cert.fingerprint if cert and cert.fingerprint else dg.MetadataValue.null(),
        # text, not a number: the UI plots numeric metadata, and a plot of ids says nothing
        "snapshot_id": str(cert.snapshot_id) if cert and cert.snapshot_id is not None else dg.MetadataValue.null(),
        "certified_by_run": cert.run_id if cert and cert.run_id else dg.MetadataValue.null(),
        "reason": detail,
    }
    severity = dg.AssetCheckSeverity.ERROR if (not passed and state in ERROR_STATES) else dg.AssetCheckSeverity.WARN
    description = f"{status.partition} {label}: {detail}"
    return dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey(served_asset(asset_state.asset)),
        check_name=CERTIFICATION_STATE,
        passed=passed,
        severity=severity,
        metadata=metadata,
        description=description,
        blocking=False,
        partition=status.partition if in_run else None,
    )


def certification_evaluations(
    platform: Platform,
    partitions: Iterable[str],
    assets: Sequence[str] = CERTIFIED_ASSETS,
    in_run: bool = False,
) -> list[dg.AssetCheckEvaluation]:
    """``certification_state`` evaluations of ``assets`` for each of ``partitions`` as things stand now."""
    return [
        state_evaluation(platform, status, asset_state, in_run)
        for status in partition_statuses(platform, sorted(set(partitions)))
        for asset_state in status.assets
        if asset_state.asset in assets
    ]


def report_certification_states(
    instance: dg.DagsterInstance, platform: Platform, partitions: Iterable[str]
) -> list[dg.AssetCheckEvaluation]:
    """Report each certified asset's state for each of ``partitions`` to the Dagster UI (runless events).

    A day that is not plainly certified gets its own row, with its reason.
    Days certified together (a range) share one row per product, which lists
    each day's version in its metadata (``days``): a year's backfill reports 3
    rows, not 1,095, and each row is an event written to the instance
    (~20 ms each on SQLite), which made certifying a range slower than it.
    """
    evaluations = _grouped(certification_evaluations(platform, partitions))
    for evaluation in evaluations:
        instance.report_runless_asset_event(evaluation)
    return evaluations


def _grouped(evaluations: list[dg.AssetCheckEvaluation]) -> list[dg.AssetCheckEvaluation]:
    """Plainly certified days of one product merged into one evaluation; every other day kept as it is."""
    certified: dict[dg.AssetKey, list[dg.AssetCheckEvaluation]] = {}
    kept = []
    for evaluation in evaluations:
        if evaluation.passed and evaluation.metadata["state"].value == CERTIFIED:
            certified.setdefault(evaluation.asset_key, []).append(evaluation)
        else:
            kept.append(evaluation)
    for key, days in certified.items():
        if len(days) == 1:
            kept.extend(days)
            continue
        first, last = days[0].metadata["partition"].value, days[-1].metadata["partition"].value
        versions = sorted({d.metadata["version"].value for d in days})
        label = "v" + "/v".join(str(v) for v in versions)
        kept.append(dg.AssetCheckEvaluation(
            asset_key=key,
            check_name=CERTIFICATION_STATE,
            passed=True,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "partitions": f"{first}...{last}",
                "state": CERTIFIED,
                "days_certified": len(days),
                "days": dg.MetadataValue.json({
                    d.metadata["partition"].value: {
                        "version": d.metadata["version"].value,
                        "certified_at": d.metadata["certified_at"].value,
                        "fingerprint": d.metadata["fingerprint"].value,
                    } for d in days
                }),
            },
            description=f"{first}...{last} CERTIFIED {label}: {len(days)} days served (each day's version in `days`)",
            blocking=False,
        ))
    return kept


# After a withdrawal wiped a served asset, how many of the newest days get their
# SLO results shown again (a year of them would take the containment a minute).
_RESHOWN_SLO_DAYS = 35


def report_day_states(
    instance: dg.DagsterInstance | None, platform: Platform, partitions: Iterable[str] | None
) -> list[dg.AssetCheckEvaluation]:
    """Show where ``partitions`` stand wherever the Dagster UI shows a day, after certification changed them.

    The ``served_*`` assets' partition status (what consumers get), each
    certified product's ``certification_state``, and the SLO checks of the days
    that have recorded SLO results (re-reported, so a reload of a delivered day
    leaves its SLO state readable). Every path that changes certification calls
    this; without an instance (``--ephemeral-instance``) nothing is shown.
    ``partitions=None`` looks at every day (certification_sensor, when the
    served state changed by another path).

    A withdrawal wipes the served asset whole (see ``sync_served_partitions``),
    and Dagster's wipe takes the asset's check history with it; the check
    rows are then reported again: every day's certification state (grouped,
    a few rows) and the SLO results of the newest days.
    """
    if instance is None:
        return []
    changed = sync_served_partitions(instance, platform, None if partitions is None else sorted(set(partitions)))
    wiped = any(entry.startswith("-") for entries in changed.values() for entry in entries)
    if partitions is None and not wiped:
        return []
    days = sorted(set(partitions or []))
    if wiped:
        days = sorted(set(days) | set(known_partitions(platform)))
        slo_days = sorted(set(days[-_RESHOWN_SLO_DAYS:]) | set(partitions or []))
    else:
        slo_days = days
    if not days:
        return []
    report_recorded_slos(instance, platform, slo_days)
    return report_certification_states(instance, platform, days)


@dg.multi_asset_check(
    specs=CERTIFICATION_SPECS,
    name="certification_states",
    can_subset=True,
    description="What consumers are served for each day of the run, per certified product (never blocking).",
)
def certification_states(context: dg.AssetCheckExecutionContext, atlasmart: AtlasmartResource):
    step = Step(context, atlasmart, CERTIFICATION_STATE)
    assets = sorted({product_of(k.asset_key.to_user_string()) for k in context.selected_asset_check_keys})
    evaluations = certification_evaluations(step.platform, step.partitions, assets, in_run=True)
    output_names = {spec.key: spec.get_python_identifier() for spec in CERTIFICATION_SPECS}
    yield from partitioned_check_events(output_names, context.selected_asset_check_keys, evaluations)
