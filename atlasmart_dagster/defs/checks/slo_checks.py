"""SLO checks on the certified marts' served assets: per-partition SLO results shown in the Dagster UI.

The figures come from the ledger (see ``product/slo.py``): they are recorded when a
partition is first delivered by the daily load, after its run. Whenever a day
may have changed (``report_day_states``, called by every certification path)
each SLO check gets, for that day, one runless evaluation saying where it stands
(``report_slos``):

* recorded results as they were recorded (a recorded miss fails);
* the current day awaiting its first delivery: availability measured up to now
  (fails once the deadline has passed); the other objectives are not measured
  yet;
* any other day without recorded results (delivered by a backfill, or not the
  daily load's first delivery) is *not measured*: a WARN failure (a warning,
  never a pass) with the reason. It is not an SLO event, so it is never
  reported as a miss. Days not measured for the same reason share one row,
  which names exactly its days.

A day whose newest row already says the same gets no new row: one decision is
one row per check, whichever paths report it. Executing the checks in a run
(select a served asset, *Materialize* with its checks, or a check-only run for
a partition) re-reads the ledger for the run's partitions and reports one
evaluation per partition, with Dagster's ``partition`` field, completing the
per-partition rows Dagster planned. Runless evaluations name their day in the
metadata only: Dagster 1.13 indexes check executions by (check, run,
partition) uniquely and runless events share one empty run id, so a second
runless evaluation of the same day would be refused. So a day measured
on an objective and served is recorded instead in the run that built its
served version, with its ``partition`` and naming that served
materialization: the check's *Partitions* tab counts a day only so (met:
*Passed*, missed: *Failed*); a day not measured reads *Missing* there, its
row in the history. Each check executes on
its own (subsettable), so *Execute all* on a served asset offers and runs
them too: it launches with no partition, and each check then writes one row
that states every day AtlasMart knows, days with the same verdict as one
range (``every_day_evaluations``).

Never blocking: an SLO miss is for people to act on, not a reason to withhold
correct data.
"""

from datetime import datetime
from typing import Iterable, Sequence

import dagster as dg

from ...product.lanes import current_partition
from ...product.serving import known_partitions
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
from ...store.ledger.day_states import DayStates
from ...store.platform import Platform
from ...store.tables import CERTIFIED_ASSETS, CERTIFIED_MARTS
from ..assets.served import served_asset
from ..partitions import daily_partitions
from .days import day_ranges
from ..assets.step import Step, partitioned_check_events
from ..dagster_event_adapter import judging, newest_materializations, report_evaluation_in_run
from .said import what_it_says_now
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


def not_measured_evaluations(
    partition: str, objectives: Sequence[str], reason: str, in_run: bool = True
) -> list[dg.AssetCheckEvaluation]:
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
            partition=partition if in_run else None,
        )
        for objective in objectives
        for asset in SLO_ASSETS
    ]


def partition_slo_evaluations(
    platform: Platform, partition: str, now: datetime, in_run: bool = True, states: DayStates | None = None
) -> list[dg.AssetCheckEvaluation]:
    """Where one day stands against its SLOs at ``now``, as evaluations of the marts' SLO checks.

    ``in_run`` sets Dagster's ``partition`` field (see the module docstring);
    ``states`` is the read model of the day (read here when None).
    """
    recorded = latest_results(platform.ledger, partition)
    if recorded:
        unrecorded = [o for o in OBJECTIVES if o not in {r.objective for r in recorded}]
        if unrecorded and all(r.objective == AVAILABILITY for r in recorded):
            # only the undelivered-availability miss is recorded; the rest waits for the delivery
            reason = "not delivered yet; measured on the day's first delivery"
        else:
            reason = "not measurable for this delivery"
        return slo_check_evaluations(recorded, in_run) + not_measured_evaluations(partition, unrecorded, reason, in_run)
    states = states if states is not None else platform.ledger.partitions.states([partition], CERTIFIED_ASSETS)
    served = [states.served(asset, partition) for asset in CERTIFIED_ASSETS]
    delivered = all(served)
    if partition == current_partition(now) and not delivered:
        # Awaiting its first delivery: how late it already is, measured up to now.
        timeline = Timeline(partition, None, scheduled_at(partition), None, None, now, None, None)
        availability = [r for r in evaluate(timeline) if r.objective == AVAILABILITY]
        others = [o for o in OBJECTIVES if o != AVAILABILITY]
        return slo_check_evaluations(availability, in_run) + not_measured_evaluations(
            partition, others, "not delivered yet; measured on the day's first delivery", in_run
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
    return not_measured_evaluations(partition, OBJECTIVES, reason, in_run)


def _covered_days(evaluation: dg.AssetCheckEvaluation) -> list[str]:
    """The days a runless SLO row speaks for: its ``partition``, or every day of a grouped row (``days``)."""
    if "days" in evaluation.metadata:
        return list(evaluation.metadata["days"].value)
    if "partition" in evaluation.metadata:
        return [evaluation.metadata["partition"].value]
    return []


def _what_it_says(evaluation: dg.AssetCheckEvaluation) -> str:
    """A row's verdict on each of its days, the same for a day's own row and a grouped row."""
    metadata = evaluation.metadata
    if "not_measured_reason" in metadata:
        return f"NOT MEASURED: {metadata['not_measured_reason'].value}"
    return (evaluation.description or "").split(" ", 1)[-1]  # without the day


# How many of a check's newest rows are read to tell what each day says now.
_HISTORY_READ = 500


def _said_per_day(
    instance: dg.DagsterInstance, key: dg.AssetCheckKey, days: set[str]
) -> dict[str, tuple[str, int | None]]:
    """What the newest row covering each of ``days`` says, and the storage id of the materialization it names
    (absent: no such row among the newest). A row of a run without a day (*Execute all*) covers none."""
    said: dict[str, tuple[str, int | None]] = {}
    for record in instance.event_log_storage.get_asset_check_execution_history(key, limit=_HISTORY_READ):
        if (record.run_id and not record.partition) or record.event is None or record.event.dagster_event is None:
            continue
        evaluation = record.event.dagster_event.asset_check_evaluation_data
        if evaluation is None:  # planned in a run, never evaluated
            continue
        target = evaluation.target_materialization_data
        for day in _covered_days(evaluation):
            if day in days and day not in said:
                said[day] = (_what_it_says(evaluation), target.storage_id if target else None)
        if len(said) == len(days):
            break
    return said


def _grouped(key: dg.AssetCheckKey, evaluations: list[dg.AssetCheckEvaluation]) -> list[dg.AssetCheckEvaluation]:
    """One check's runless rows: each measured day its own; not-measured days with the same reason one row.

    A year's backfill is then one row per check, not 365 (each row is an
    event written to the instance, ~20 ms on SQLite); a grouped row names
    exactly its days (``days``), never a range with a day of another reason.
    """
    kept, by_reason = [], {}
    for evaluation in evaluations:
        if "not_measured_reason" in evaluation.metadata:
            by_reason.setdefault(evaluation.metadata["not_measured_reason"].value, []).append(evaluation)
        else:
            kept.append(evaluation)
    objective = key.name.removeprefix("slo_")
    for reason, group in by_reason.items():
        if len(group) == 1:
            kept.append(group[0])
            continue
        days = sorted(e.metadata["partition"].value for e in group)
        kept.append(dg.AssetCheckEvaluation(
            asset_key=key.asset_key, check_name=key.name, passed=False, severity=dg.AssetCheckSeverity.WARN,
            metadata={"partitions": day_ranges(days), "days": dg.MetadataValue.json(days), "measured": False,
                      "not_measured_reason": reason, "value": "n/a", "unit": UNITS[objective],
                      "target": TARGETS[objective]},
            description=f"{day_ranges(days)} NOT MEASURED ({objective}): {reason}",
            blocking=False,
        ))
    return sorted(kept, key=lambda e: _covered_days(e)[0])


def report_slos(
    instance: dg.DagsterInstance, platform: Platform, partitions: Iterable[str], states: DayStates | None = None
) -> list[dg.AssetCheckEvaluation]:
    """Show where each of ``partitions`` stands against its SLOs as runless evaluations of the marts' SLO checks.

    Recorded results as recorded (a miss fails); a day without results is
    ``NOT MEASURED`` with why, a WARN (a backfilled day, a reload, a day not
    delivered yet). A day whose newest row already says the same gets no new
    row, unless the check's newest row no longer reads against the served
    asset's newest materialization (``said.py``: each row names the one it
    judges), so a decision reported by its command and again by the sensor, even
    at the same moment (the ledger's write lock, as in ``said.py``), is one
    row per check. Returns the evaluations written.
    """
    days = sorted(set(partitions))
    if not days:
        return []
    now = platform.clock.now()
    states = states if states is not None else platform.ledger.partitions.states(days, CERTIFIED_ASSETS)
    by_key: dict[dg.AssetCheckKey, list[dg.AssetCheckEvaluation]] = {}
    for day in days:
        for evaluation in partition_slo_evaluations(platform, day, now, in_run=False, states=states):
            by_key.setdefault(evaluation.asset_check_key, []).append(evaluation)
    written = []
    # A measured day is recorded in the run that built its served version (``_in_runs``); a backfill has none.
    measured = sorted({e.metadata["partition"].value for evaluations in by_key.values() for e in evaluations
                       if e.metadata["measured"].value})
    served = {asset: newest_materializations(instance, dg.AssetKey(asset), measured) for asset in SLO_ASSETS}
    for key in SLO_CHECK_KEYS:
        with platform.ledger.engine.transaction():  # asked and written under one lock: see said.py
            fresh = by_key.get(key, [])
            in_run = _in_runs(fresh, served[key.asset_key.to_user_string()])
            if what_it_says_now(instance, key) is not None:  # else a newer served day: say these days again
                said = _said_per_day(instance, key, set(days))
                fresh = [e for e in fresh if not _still_said(said, e, in_run)]
            for evaluation in fresh:
                day = evaluation.metadata["partition"].value
                if day in in_run:  # measured, and served: counted in the check's Partitions tab
                    report_evaluation_in_run(instance, in_run[day], evaluation)
                    written.append(evaluation)
            for evaluation in _grouped(key, [e for e in fresh if e.metadata["partition"].value not in in_run]):
                instance.report_runless_asset_event(judging(instance, evaluation))
                written.append(evaluation)
    return written


def _in_runs(evaluations: list[dg.AssetCheckEvaluation], served: dict) -> dict:
    """The days of ``evaluations`` measured and served in a run of this instance -> their served materialization.

    These are counted in the check's *Partitions* tab: Dagster counts a day
    only by an evaluation with the day that names the day's newest
    materialization, and a runless one with a day could be written once
    (``report_evaluation_in_run``). The other days keep their runless rows,
    without a day (read *Missing* there): not measured, not served, or served
    runless (a home restored into a new instance).
    """
    days = {e.metadata["partition"].value for e in evaluations if e.metadata["measured"].value}
    return {day: served[day] for day in days if day in served and served[day].run_id}


def _still_said(said: dict[str, tuple[str, int | None]], evaluation: dg.AssetCheckEvaluation, in_run: dict) -> bool:
    """Whether the newest row of the evaluation's day says the same (and, for a day recorded in its served run,
    names the day's served materialization now, else its Partitions tab would stop counting it)."""
    day = evaluation.metadata["partition"].value
    if day not in said or said[day][0] != _what_it_says(evaluation):
        return False
    return day not in in_run or said[day][1] == in_run[day].storage_id


def every_day_evaluations(
    platform: Platform, now: datetime, days: Sequence[str] | None = None
) -> list[dg.AssetCheckEvaluation]:
    """One evaluation per SLO check stating every day (``days``; None: every day AtlasMart knows), by verdict.

    What *Execute all* on a served asset reports: it launches a run with no
    partition, so each check gets one row, which says what each day's own
    row says, days with the same verdict as one range. It passes only when
    every day met the objective; a miss or a day not measured is a WARN.
    """
    if days is None:
        days = [d for d in known_partitions(platform) if daily_partitions.has_partition_key(d)]
    states = platform.ledger.partitions.states(list(days), CERTIFIED_ASSETS)
    by_key: dict[dg.AssetCheckKey, list[dg.AssetCheckEvaluation]] = {}
    for day in days:
        for evaluation in partition_slo_evaluations(platform, day, now, in_run=False, states=states):
            by_key.setdefault(evaluation.asset_check_key, []).append(evaluation)
    return [_every_day(key, by_key.get(key, [])) for key in SLO_CHECK_KEYS]


def _every_day(key: dg.AssetCheckKey, evaluations: list[dg.AssetCheckEvaluation]) -> dg.AssetCheckEvaluation:
    """One check's days (their own evaluations) as one evaluation: the counts, then each verdict with its days."""
    objective = key.name.removeprefix("slo_")
    verdicts: dict[str, list[str]] = {}
    for evaluation in evaluations:
        verdicts.setdefault(_what_it_says(evaluation), []).append(evaluation.metadata["partition"].value)
    met = [e for e in evaluations if e.passed]
    not_measured = [e for e in evaluations if "not_measured_reason" in e.metadata]
    missed = len(evaluations) - len(met) - len(not_measured)
    headline = (f"**{objective}: {len(met)} of {len(evaluations)} days met, {missed} missed, "
                f"{len(not_measured)} not measured**" if evaluations else f"**{objective}: no day known yet**")
    lines = [headline] + [f"- {day_ranges(days)} {verdict}"
                          for verdict, days in sorted(verdicts.items(), key=lambda item: min(item[1]))]
    return dg.AssetCheckEvaluation(
        asset_key=key.asset_key, check_name=key.name, passed=bool(evaluations) and len(met) == len(evaluations),
        severity=dg.AssetCheckSeverity.WARN, description="\n".join(lines), blocking=False,
        metadata={"days": dg.MetadataValue.json({e.metadata["partition"].value: _what_it_says(e) for e in evaluations}),
                  "met_days": len(met), "missed_days": missed, "not_measured_days": len(not_measured),
                  "unit": UNITS[objective], "target": TARGETS[objective]},
    )


@dg.multi_asset_check(
    specs=SLO_CHECK_SPECS,
    name="partition_slos",
    can_subset=True,
    description="Per-partition SLOs of the marts' daily delivery, as recorded in the ledger (never blocking).",
)
def partition_slos(context: dg.AssetCheckExecutionContext, atlasmart: AtlasmartResource):
    """Executed in a run: one row per day of the run, or, with no partition (*Execute all*), one stating every day."""
    step = Step(context, atlasmart, SLO_ASSETS[0])
    now = step.now()
    if step.partitions:
        evaluations = [e for partition in step.partitions
                       for e in partition_slo_evaluations(step.platform, partition, now)]
    else:  # an AssetCheckResult would not do: Dagster 1.13 asks a partitioned check's run for its partition
        evaluations = every_day_evaluations(step.platform, now)
    output_names = {spec.key: spec.get_python_identifier() for spec in SLO_CHECK_SPECS}
    yield from partitioned_check_events(context.instance, output_names, context.selected_asset_check_keys,
                                        evaluations)
