"""The certification sensor: after runs end, certify what they built and show every day's state.

It is a plain sensor that works from the ledger, not a run-status sensor that
works from the runs it happened to see: a run-status sensor starts at the
newest run when it is turned on, so runs that ended while it was off would
never be certified. Each tick:

1. finds every build of a certified product the gate has not decided yet
   (``BUILT`` with no ``CERTIFIED``/``CERTIFICATION_REFUSED`` naming it),
   whichever way its run was launched (job page, asset graph, ``dagster asset
   materialize``, ``dg launch``, the daemon), and decides those whose run has
   ended in this instance: a successful run goes through the gate, a failed or
   canceled one is refused with that reason. Idempotent: a decided build is
   never decided again, and no build waits for ever;
2. shows, for every day those decisions and any other run that ended since the
   last tick touched (a failed load that built nothing, too), the day's state
   where people look: the ``served_*`` assets' partition status and their
   ``certification_state`` and SLO checks;
3. whenever the ledger's served state changed by any other path (an
   ``atlasmart`` command without this instance, a migration, a restore), brings
   the ``served_*`` assets back in line with it;
4. brings the ``certified`` Iceberg branch of every certified table in line
   with the served state (``product/certified_branch.py``): a decision whose
   publish was interrupted (a crash between ledger and branch, a command
   without the branch, an incident's withdrawal) is published here;
5. requests the dashboards' golden cross-checks after new certifications.

On by default: an install that certifies nothing is not working.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone

import dagster as dg

from ...product.certified_branch import converge
from ...product.dashboard_certification import certify_dashboards
from ...product.run_certification import certify_run
from ...store.ledger.day_states import DayStates
from ...store.platform import Platform
from ...store.tables import CERTIFIED_ASSETS
from ..checks.certification_checks import report_certification_states, report_day_states
from ..partitions import partition_keys_from_tags
from ..resources import AtlasmartResource, skips_when_clock_refused
from ..tracing import IN_PROCESS, RUN_SPAN_TAG, enabled, flush, record_run
from .jobs import dashboard_checks_job

ENDED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
# Ended runs looked at per tick; more wait for the next tick (the cursor keeps the place).
RUNS_PER_TICK = 200


def undecided_builds_by_run(states: DayStates) -> dict[str, set[str]]:
    """Runs with builds of certified products the gate has not decided, and the days of those builds."""
    waiting: dict[str, set[str]] = {}
    for day in states:
        if day.asset not in CERTIFIED_ASSETS:
            continue  # the gate decides certified products only; other assets' builds stay undecided
        for build in day.undecided_builds:
            if build.run_id:
                waiting.setdefault(build.run_id, set()).add(build.partition)
    return waiting


def served_digest(states: DayStates) -> str:
    """A digest of what is served (asset, day, certification): changes whenever serving changes."""
    state = {
        asset: sorted((day, v.certification.id) for day, v in states.served_map(asset).items())
        for asset in CERTIFIED_ASSETS
    }
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()


def _ended_runs_since(instance: dg.DagsterInstance, since: float | None) -> list:
    after = datetime.fromtimestamp(since, tz=timezone.utc) if since is not None else None
    return list(
        instance.get_run_records(
            dg.RunsFilter(statuses=list(ENDED), updated_after=after),
            limit=RUNS_PER_TICK,
            order_by="update_timestamp",
            ascending=True,
        )
    )


def certification_tick(instance: dg.DagsterInstance, platform: Platform, cursor: str | None, actor: str):
    """One tick (see the module docstring): ``(decisions, new cursor, days shown, certifying run ids)``."""
    state = json.loads(cursor) if cursor else {}
    decisions, certifying, touched, handled = [], [], set(), set()
    # One read of every asset's days per tick, handed to every step that needs one while the tick has
    # recorded nothing (a quiet tick reads the ledger once); after deciding, each step reads afresh.
    states = platform.ledger.partitions.states()
    for run_id, days in sorted(undecided_builds_by_run(states).items()):
        run = instance.get_run_by_id(run_id)
        if run is None or run.status not in ENDED:
            continue  # still running, or not a run of this instance (its own command certifies it)
        handled.add(run_id)
        run_decisions = certify_run(platform, run_id, run_succeeded=run.status == dg.DagsterRunStatus.SUCCESS,
                                    actor=actor)
        decisions += run_decisions
        touched |= days | {d.partition for d in run_decisions if d.asset in CERTIFIED_ASSETS}
        if any(d.certified and d.asset in CERTIFIED_ASSETS for d in run_decisions):
            certifying.append(run_id)
    since = state.get("runs_updated_after")
    records = _ended_runs_since(instance, since)
    traced = enabled()
    for record in records:
        run = record.dagster_run
        if traced:
            _trace_run(record, since)
        touched |= set(partition_keys_from_tags(dict(run.tags)))
        if run.status == dg.DagsterRunStatus.SUCCESS and run.run_id not in handled:
            # A golden-check run certifies dashboard days (idempotent; nothing for other runs).
            decisions += certify_dashboards(platform, run.run_id, actor)
    if traced and records:
        flush()
    if records:
        state["runs_updated_after"] = records[-1].update_timestamp.timestamp()
    if touched:
        report_day_states(instance, platform, sorted(touched))
    fresh = None if decisions or touched else states
    converge(platform, fresh)  # every tick: idempotent, and free when the branch already holds the served state
    digest = served_digest(platform.ledger.partitions.states(None, CERTIFIED_ASSETS) if decisions else states)
    if digest != state.get("served_digest"):
        report_day_states(instance, platform, None)  # every day: brought in line with the ledger
        state["served_digest"] = digest
    elif not touched:
        # Nothing decided, but a day may have fallen due or late by time alone (PENDING -> DELAYED): the
        # headline says so without waiting for a decision (no new row when it already says the same).
        report_certification_states(instance, platform, [], states=fresh)
    return decisions, json.dumps(state, sort_keys=True), sorted(touched), certifying


def _trace_run(record: dg.RunRecord, since: float | None) -> None:
    """The span of a run that ended since the last tick, unless its own process emitted it (in-process runs).

    The run's steps, wherever they executed, named this span as their parent
    (see ``defs/tracing.py``). A run seen again because something updated it
    after it ended (it ended before the last tick) is not emitted twice.
    """
    if record.dagster_run.tags.get(RUN_SPAN_TAG) == IN_PROCESS:
        return
    if since is not None and record.end_time is not None and record.end_time <= since:
        return
    record_run(record, send=False)  # sent once for the whole tick


@dg.sensor(
    name="certification_sensor",
    minimum_interval_seconds=30,
    jobs=[dashboard_checks_job],
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Certifies every run's builds once the run has ended, whenever the sensor was turned on and however the "
        "run was launched: the gate records CERTIFIED (or CERTIFICATION_REFUSED with reasons) in the ledger. Then "
        "shows each touched day where people look: the served_* assets' partitions (materialized = served), "
        "certification_state and the SLO checks; and requests the dashboards' golden cross-checks after new "
        "certifications."
    ),
)
@skips_when_clock_refused
def certification_sensor(context: dg.SensorEvaluationContext, atlasmart: AtlasmartResource):
    decisions, cursor, touched, certifying = certification_tick(
        context.instance, atlasmart.platform, context.cursor, actor="certification_sensor"
    )
    context.update_cursor(cursor)
    refused = [d for d in decisions if not d.certified]
    if refused:
        context.log.warning(
            "certification refused: " + "; ".join(f"{d.asset} {d.partition}: {', '.join(d.reasons)}" for d in refused)
        )
    certified = sorted({d.partition for d in decisions if d.certified})
    if certified:
        context.log.info(f"certified partitions {', '.join(certified)}")
    requests = [dg.RunRequest(run_key=f"golden-{run_id}") for run_id in certifying]
    if requests:
        return dg.SensorResult(run_requests=requests)
    shown = f"; showed the state of {len(touched)} day(s)" if touched else ""
    return dg.SkipReason(f"no ended run left to certify{shown}")
