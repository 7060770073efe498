"""Partition-scoped backfills in the backfill lane, with who asked and why.

An operator names a range of days, optionally the asset to start from (the
smallest scope that repairs the damage: ``--start-at agg_daily_sales``
rebuilds the aggregate and what is downstream of it, never the facts), and
says who they are, why, and which incident it serves. The request and its
outcome are appended to the ledger. The range is one run (single-run
backfill policy), in the backfill lane, and may not include the current day
unless named explicitly.

Two ways to execute: in-process now (default; holds the backfill lane lock),
or submitted to the Dagster daemon as an asset backfill, where the run queue's
lane limits apply. In a team deployment the default also goes through the
daemon and waits for it; if the daemon stops while the backfill still needs
it, the request is recorded SUBMITTED with the Dagster backfill it is left
in, and the same request again waits for that backfill (``earlier_submission``).
"""

from __future__ import annotations

from contextlib import nullcontext

from dataclasses import asdict, dataclass
from datetime import date

import dagster as dg

from ...store.tables import DAILY_CHAIN
from ...defs.partitions import FIRST_SALES_DATE, daily_partitions
from ...errors import LaneViolation
from ...product.lanes import BACKFILL, INCLUDE_CURRENT_TAG, LANE_TAG, current_partition
from ...store.locks import lane_lock
from ...store.platform import Platform
from .dagster_backfill_adapter import asset_submission, queue_asset_backfill, unfinished_asset_backfill
from .queue import DaemonStopped
from .chains import RunOutcome, run_chain

OPERATOR_TAG = "atlasmart/operator"
REASON_TAG = "atlasmart/reason"
INCIDENT_TAG = "atlasmart/incident"
REQUEST_TAG = "atlasmart/backfill_request"


@dataclass(frozen=True)
class BackfillRequest:
    start: str
    end: str
    operator: str
    reason: str
    incident_id: str | None = None
    start_at: str | None = None
    include_current: bool = False

    def validate(self, platform: Platform) -> list[str]:
        problems = []
        for name, value in (("from", self.start), ("to", self.end)):
            try:
                date.fromisoformat(value)
            except ValueError:
                problems.append(f"--{name} {value!r} is not a date (YYYY-MM-DD)")
        if problems:
            return problems
        if self.start > self.end:
            problems.append(f"--from {self.start} is after --to {self.end}")
        if self.start < FIRST_SALES_DATE:
            problems.append(f"--from {self.start} is before the first partition {FIRST_SALES_DATE}")
        current = current_partition(platform.clock.now())
        if self.end > current:
            problems.append(f"--to {self.end} is after the current partition {current}")
        if current <= self.end and current >= self.start and not self.include_current:
            problems.append(
                f"the range includes the current partition {current}; the backfill lane leaves it alone "
                "unless you pass --include-current"
            )
        if not self.operator.strip():
            problems.append("--operator is required (who is running this backfill)")
        if not self.reason.strip():
            problems.append("--reason is required (why the history is being rebuilt)")
        if self.start_at is not None and self.start_at not in DAILY_CHAIN:
            problems.append(f"--start-at must be one of {', '.join(DAILY_CHAIN)}")
        return problems

    @property
    def partitions(self) -> list[str]:
        return list(daily_partitions.get_partition_keys_in_range(dg.PartitionKeyRange(self.start, self.end)))

    @property
    def asset_keys(self) -> list[dg.AssetKey]:
        """The chain from ``start_at`` down (the whole chain by default)."""
        first = DAILY_CHAIN.index(self.start_at) if self.start_at else 0
        # quarantine is produced together with staging; never a start on its own
        chain = [a for a in DAILY_CHAIN[first:]]
        if "stg_order_lines" in chain and "quarantine_order_lines" not in chain:
            chain.append("quarantine_order_lines")
        return [dg.AssetKey(a) for a in chain]

    def tags(self, request_id: str) -> dict[str, str]:
        tags = {LANE_TAG: BACKFILL, OPERATOR_TAG: self.operator, REASON_TAG: self.reason, REQUEST_TAG: request_id}
        if self.incident_id:
            tags[INCIDENT_TAG] = self.incident_id
        if self.include_current:
            tags[INCLUDE_CURRENT_TAG] = "true"
        return tags


def run_backfill(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    platform: Platform,
    request: BackfillRequest,
    wait_seconds: float = 0.0,
    log_level: str | None = None,
    progress=None,
) -> RunOutcome:
    """Execute the backfill in-process now, holding the backfill lane lock."""
    request_id = _admit(platform, request)
    ledger = platform.ledger
    recorded = asdict(request)
    # In process, the lane lock admits one backfill at a time; in a team
    # deployment the run goes through the instance's queue, whose tag limits
    # are the one lane mechanism for every submitter.
    queued = platform.home.team and not instance.is_ephemeral
    # Read before this request's own REQUESTED row below, which would be the newest request of these days.
    adopted = left_behind(instance, platform, request) if queued else None
    ledger.backfills.record(request_id, "REQUESTED", recorded, platform.clock.now())
    try:
        with nullcontext() if queued else lane_lock(platform.home, BACKFILL, wait_seconds):
            outcome = run_chain(
                defs,
                instance,
                platform,
                request.partitions,
                lane=BACKFILL,
                tags=request.tags(request_id),
                asset_selection=request.asset_keys,
                log_level=log_level,
                progress=progress,
                backfill_id=adopted,
            )
    except DaemonStopped as stopped:
        # The work stays in the instance (queued, or a backfill the daemon has not finished):
        # the ledger says where, and the same request again waits for it.
        ledger.backfills.record(
            request_id,
            "SUBMITTED",
            recorded,
            platform.clock.now(),
            run_id=stopped.run_ids[-1] if stopped.run_ids else None,
            dagster_backfill_id=stopped.backfill_id,
            detail={"daemon_stopped": str(stopped), "run_ids": stopped.run_ids},
        )
        raise
    ledger.backfills.record(
        request_id,
        "FINISHED",
        recorded,
        platform.clock.now(),
        run_id=outcome.run_id,
        success=outcome.success,
        dagster_backfill_id=outcome.backfill_id,  # collected: a later request never waits for it again
        detail={"certified": outcome.certified, "failures": outcome.failures},
    )
    outcome.request_id = request_id
    return outcome


def earlier_submission(instance: dg.DagsterInstance, platform: Platform, request: BackfillRequest) -> str | None:
    """The Dagster backfill of the same work that an earlier request left unfinished, if any.

    ``run_backfill`` (team deployment) and ``submit_to_daemon`` wait for it or
    return it instead of submitting the work a second time.
    """
    if not platform.home.team or instance.is_ephemeral:
        return None
    earlier = unfinished_asset_backfill(instance, asset_submission(request.partitions, request.asset_keys, BACKFILL))
    return earlier.backfill_id if earlier is not None else None


# What a Dagster backfill ends in once the daemon has run it to the end (its runs decide success). Unlike
# what queue.wait_for_backfill stops waiting on, not FAILED or CANCELED: work stopped that way is done anew.
_DONE = ("COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED")


def left_behind(instance: dg.DagsterInstance, platform: Platform, request: BackfillRequest) -> str | None:
    """The Dagster backfill of this work that a command stopped waiting for, which the daemon finished since.

    A command whose daemon stopped records its request SUBMITTED with the
    backfill and says "run again, then waits for it". The daemon, once back,
    may finish that backfill at its first tick, before the command is run
    again: the backfill is no longer REQUESTED, but no command collected its
    outcome (no request FINISHED with it). The command run again collects it
    instead of doing the work a second time. The newest request of these days
    must be that one: any later request of them supersedes it.
    """
    if not platform.home.team or instance.is_ephemeral:
        return None
    rows = platform.ledger.backfills.list()
    same = [r for r in rows
            if (r["partition_from"], r["partition_to"], r["start_at"]) == (request.start, request.end, request.start_at)]
    if not same:
        return None
    newest = max(same, key=lambda r: r["id"])
    backfill_id = newest["dagster_backfill_id"]
    stopped = newest["event"] == "SUBMITTED" and (newest["detail"] or {}).get("daemon_stopped")
    if not stopped or not backfill_id:
        return None
    collected = any(r["event"] == "FINISHED" and r["dagster_backfill_id"] == backfill_id for r in rows)
    backfill = instance.get_backfill(backfill_id)
    if collected or backfill is None or backfill.status.value not in _DONE:
        return None
    return backfill_id


def _admit(platform: Platform, request: BackfillRequest) -> str:
    """Refuse an invalid request; otherwise allocate its id."""
    problems = request.validate(platform)
    if problems:
        raise LaneViolation("backfill refused: " + "; ".join(problems))
    return platform.ledger.allocate_id("BF")


def submit_to_daemon(defs: dg.Definitions, instance: dg.DagsterInstance, platform: Platform, request: BackfillRequest) -> str:
    """Queue the backfill as a Dagster asset backfill; the daemon runs it in the backfill lane.

    Returns the Dagster backfill id.
    """
    request_id = _admit(platform, request)
    backfill_id = queue_asset_backfill(
        defs,
        instance,
        partitions=request.partitions,
        asset_keys=request.asset_keys,
        tags=request.tags(request_id),
        title=f"{request_id}: {request.start}..{request.end}",
        description=f"{request.operator}: {request.reason}",
    )
    platform.ledger.backfills.record(
        request_id, "SUBMITTED", asdict(request), platform.clock.now(), dagster_backfill_id=backfill_id
    )
    return backfill_id
