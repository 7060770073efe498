"""After a run: the gate decides, fully certified days are delivered, cleared dashboards are certified.

Runs build and check; they never certify. ``certify_run`` is what the
certification sensor, ``atlasmart certify`` and every ``atlasmart`` run call
once a run has ended. Each step is its own module and is only called here:

1. the certification gate decides every candidate the run built
   (``certification_gate.py``);
2. a day whose every certified product was just certified is *delivered*: its
   first-delivery SLOs are measured and recorded (``slo.py``; the Dagster side
   shows the recorded results as check evaluations);
3. dashboard days whose golden cross-check passed in the run are certified
   (``dashboard_certification.py``).

After the gate has decided, the ``certified`` Iceberg branch of every
certified table is brought in line with what is served now
(``certified_branch.py``): the ledger decides first, the branch follows.

The path is one descent over the ledger: the gate reads the days it judges,
records its decisions, and the ledger's days are then read once more, as the
decisions left them (``DayStates``). That one read is handed to the branch,
to the deliveries' SLOs and, through ``RunCertification.states``, to
whatever shows the result next (``report_day_states``): none of them reads
the ledger's days again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..store.ledger.day_states import DayStates
from ..store.ledger.partition_states import PartitionEvent
from ..store.platform import Platform
from ..store.tables import CERTIFIED_ASSETS
from .certification_gate import GateDecision, certify_builds
from .certified_branch import converge
from .dashboard_certification import certify_dashboards
from .slo import SloResult, record_first_delivery

@dataclass(frozen=True)
class RunCertification:
    """What a certification decided, and the ledger's days as the decisions left them.

    ``states`` is every asset's days read once after the gate recorded its
    decisions (None when there was nothing to decide): hand it to what shows
    the result (``report_day_states``) instead of reading again.
    """

    decisions: list[GateDecision]
    states: DayStates | None = None


def certify_run(
    platform: Platform,
    run_id: str,
    run_succeeded: bool,
    actor: str = "certification-gate",
) -> list[GateDecision]:
    """Certify (or refuse) everything ``run_id`` built for certified assets, then its dashboards. Idempotent."""
    return certify_run_read(platform, run_id, run_succeeded, actor).decisions


def certify_run_read(
    platform: Platform,
    run_id: str,
    run_succeeded: bool,
    actor: str = "certification-gate",
) -> RunCertification:
    """``certify_run``, and the one read of the ledger's days its decisions left (see ``RunCertification``)."""
    # What the run recorded, read once: its pending builds, and the dashboard days already decided for it
    # (the gate's decisions below concern the certified products only, so this read stays true of dashboards).
    recorded = platform.ledger.partitions.of_run(run_id)
    certified = certify_and_deliver_read(platform, pending_builds(platform, run_id, recorded), run_succeeded, actor)
    decisions = list(certified.decisions)
    if run_succeeded:
        decisions += certify_dashboards(platform, run_id, actor, recorded)
    return RunCertification(decisions, certified.states)


def pending_builds(platform: Platform, run_id: str, recorded: DayStates | None = None) -> list[PartitionEvent]:
    """The newest build of each certified (asset, partition) in the run that the gate has not decided yet.

    ``recorded``: the caller's read of what the run recorded (``of_run``; read here when None).
    """
    recorded = recorded if recorded is not None else platform.ledger.partitions.of_run(run_id)
    return [
        day.builds[-1] for day in recorded
        if day.asset in CERTIFIED_ASSETS and day.builds and day.builds[-1] in day.undecided_builds
    ]


def certify_and_deliver(
    platform: Platform,
    builds: list[PartitionEvent],
    run_succeeded: bool,
    actor: str,
) -> list[GateDecision]:
    """The gate on ``builds``, then the delivery of every day it certified whole."""
    return certify_and_deliver_read(platform, builds, run_succeeded, actor).decisions


def certify_and_deliver_read(
    platform: Platform,
    builds: list[PartitionEvent],
    run_succeeded: bool,
    actor: str,
) -> RunCertification:
    """``certify_and_deliver``, and the one read of every day after the decisions, handed to the branch and SLOs."""
    decisions = certify_builds(platform, builds, run_succeeded, actor)
    if not builds:
        converge(platform)  # nothing decided: the branch still converges (after a crash), on its own read
        return RunCertification(decisions)
    after = platform.ledger.partitions.states()
    converge(platform, states=after)
    deliver(platform, builds, decisions, platform.clock.now(), states=after)
    return RunCertification(decisions, after)


def deliver(
    platform: Platform, builds: list[PartitionEvent], decisions: list[GateDecision], at: datetime,
    states: DayStates | None = None,
) -> list[SloResult]:
    """Days whose every certified product was just certified are delivered: measure their SLOs.

    ``states``: the caller's read of the days after the decisions (each day is read here when None).
    """
    delivered = {d.partition for d in decisions if d.certified} - {d.partition for d in decisions if not d.certified}
    by_partition = {e.partition: e for e in builds}
    results: list[SloResult] = []
    for partition in sorted(delivered):
        build = by_partition[partition]
        results += record_first_delivery(platform.ledger, partition, build.run_id, build.lane, at, states)
    return results
