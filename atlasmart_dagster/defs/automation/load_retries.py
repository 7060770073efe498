"""Automated loads that stopped before they finished: tried again by the landing sensor, a bounded number of times.

The schedule and ``landing_manifest_sensor`` load a landed batch once: a
batch the ledger knows is "already loaded". The raw step records the batch as
soon as readiness admits it, so a load interrupted after that (SIGTERM or
Ctrl-C, which Dagster turns into a failed run at the next step; SIGKILL, which
leaves the run STARTED until ``reap_dead_runs`` fails it) or stopped by a
storage error that outlasted the step's retries, left a known batch and a day
that was never finished, and no automation loaded it again. (A SIGKILL before
the batch was recorded left nothing, so the next tick loaded the day as new.)

A load of a known batch counts as **finished** once any run, started after the
batch's first load began, got to the end of the chain for the day (the
ledger's ``run_finished`` phase). Otherwise the automated attempts for the
batch (the run that recorded it, when the schedule or the sensor made it, and
the retries, tagged ``atlasmart/retry_of_batch``) decide:

* the newest attempt is still running: wait;
* it failed for a reason a retry cannot cure (a step failure marked not
  retryable, such as "source not ready" or an unclassified error, or a
  blocking check that failed): not retried, the day's incident says why;
* it was interrupted, its process died, or it failed otherwise: the sensor
  requests attempt n + 1, up to ``MAX_LOAD_ATTEMPTS``; then it gives up, and
  says so (the tick also records it on the day's incident).

A load an operator started (``atlasmart backfill``) is never retried
automatically: the operator decides.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from ...store.clock import RUN_FINISHED, RUN_STARTED
from ...store.landing import named_batch_id
from ...store.platform import Platform
from .jobs import TRIGGER_TAG

#: Automated attempts at loading one batch (the first load and its retries).
MAX_LOAD_ATTEMPTS = 3
RETRY_OF_TAG = "atlasmart/retry_of_batch"
ATTEMPT_TAG = "atlasmart/attempt"
AUTOMATED_TRIGGERS = ("schedule", "landing_manifest_sensor")

_IN_PROGRESS = (dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
                dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING)
_INTERRUPTS = ("DagsterExecutionInterruptedError", "KeyboardInterrupt")


@dataclass(frozen=True)
class UnfinishedLoad:
    """A known batch whose automated load never finished, and what automation does about it."""

    partition: str
    batch_id: str
    attempts: int  # automated attempts so far
    last_run_id: str
    retry: bool  # another attempt is due now
    gave_up: bool  # MAX_LOAD_ATTEMPTS attempts failed for reasons a retry may cure
    reason: str  # one line: what happened and what automation does
    last_job: str = ""

    @property
    def next_attempt(self) -> int:
        return self.attempts + 1


def instance_of(context) -> dg.DagsterInstance | None:
    """The instance a schedule or sensor evaluates against; None for a context built without one (in tests)."""
    try:
        return context.instance
    except dg.DagsterInvariantViolationError:
        return None


def _finished_since(phases: list[dict], first_run_id: str) -> bool:
    started = [p["id"] for p in phases if p["run_id"] == first_run_id and p["phase"] == RUN_STARTED]
    since = min(started) if started else 0
    return any(p["phase"] == RUN_FINISHED and p["id"] > since for p in phases)


def _why_failed(instance: dg.DagsterInstance, run_id: str) -> tuple[bool, str]:
    """(a retry may cure it, what stopped the run) from the run's failure events."""
    events = instance.all_logs(run_id, of_type={dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE,
                                                dg.DagsterEventType.ASSET_CHECK_EVALUATION})
    why = None
    for entry in events:
        event = entry.dagster_event
        if event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            evaluation = event.event_specific_data
            if not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR:
                return False, f"blocking check {evaluation.check_name} failed"
        elif event.event_type == dg.DagsterEventType.STEP_FAILURE:
            data = event.step_failure_data
            failure = data.user_failure_data
            if failure is not None and failure.metadata.get("retryable") is not None \
                    and failure.metadata["retryable"].value is False:
                return False, f"{event.step_key}: {failure.description}"
            if data.error is not None and data.error.cls_name in _INTERRUPTS:
                why = why or f"{event.step_key} was interrupted"
            elif data.error is not None:
                why = why or f"{event.step_key}: {data.error.message.strip().splitlines()[0]}"
        elif why is None:
            why = (event.message or "the run failed").strip().splitlines()[0]
    return True, why or "the run failed"


def unfinished_load(
    instance: dg.DagsterInstance,
    platform: Platform,
    partition: str,
    batch_id: str,
    batches: list[dict] | None = None,
    phases: list[dict] | None = None,
) -> UnfinishedLoad | None:
    """What automation should do about a known batch of ``partition`` (see module doc); None: nothing.

    ``batches`` (the ledger's batch records, of this day or all) and
    ``phases`` (its run phases of this day, see ``phases_by_day``) save the
    reads when the caller asks about many days.
    """
    batches = platform.ledger.batches.list(partition) if batches is None else batches
    batch = next((b for b in batches if b["batch_id"] == batch_id and b["partition"] == partition), None)
    if batch is None or not batch["run_id"]:
        return None
    phases = platform.ledger.runs.phases(partition=partition) if phases is None else phases
    if _finished_since([p for p in phases if p["partition"] == partition], batch["run_id"]):
        return None
    first = instance.get_run_record_by_id(batch["run_id"])
    if first is None or first.dagster_run.tags.get(TRIGGER_TAG) not in AUTOMATED_TRIGGERS:
        return None  # another instance's run, or an operator's: not ours to retry
    retries = instance.get_run_records(filters=dg.RunsFilter(tags={RETRY_OF_TAG: batch_id}))
    attempts = sorted([first, *retries], key=lambda r: r.create_timestamp)
    last = attempts[-1].dagster_run
    if last.status == dg.DagsterRunStatus.SUCCESS:
        return None
    count = len(attempts)
    where = f"{partition}: the load of batch {batch_id} (attempt {count} of {MAX_LOAD_ATTEMPTS}, run {last.run_id[:8]})"

    def load(reason: str, retry: bool = False, gave_up: bool = False) -> UnfinishedLoad:
        return UnfinishedLoad(partition, batch_id, count, last.run_id, retry, gave_up, reason, last.job_name)

    if last.status in _IN_PROGRESS:
        return load(f"{where} is still running")
    curable, why = _why_failed(instance, last.run_id)
    if not curable:
        return load(f"{where} failed ({why}); not retried, a retry would fail the same way: fix the cause, then "
                    "backfill the day")
    if count >= MAX_LOAD_ATTEMPTS:
        return load(f"{where} did not finish ({why}); gave up after {count} attempts: backfill the day once the "
                    "cause is fixed", gave_up=True)
    return load(f"{where} did not finish ({why}); retried as attempt {count + 1}", retry=True)


def phases_by_day(platform: Platform) -> dict[str, list[dict]]:
    """The ledger's run phases, grouped by day."""
    grouped: dict[str, list[dict]] = {}
    for phase in platform.ledger.runs.phases():
        grouped.setdefault(phase["partition"], []).append(phase)
    return grouped


def given_up_loads(instance: dg.DagsterInstance, platform: Platform) -> list[UnfinishedLoad]:
    """The landed batches whose automated loads were given up (``MAX_LOAD_ATTEMPTS`` attempts failed)."""
    batches = platform.ledger.batches.list()
    known = {b["batch_id"] for b in batches}
    phases = phases_by_day(platform) if known else {}
    found = []
    for partition in platform.landing.partitions():
        raw = platform.landing.read_manifest_bytes(partition)
        batch_id = named_batch_id(raw) if raw is not None else None
        if batch_id in known:
            unfinished = unfinished_load(instance, platform, partition, batch_id, batches, phases.get(partition, []))
            if unfinished is not None and unfinished.gave_up:
                found.append(unfinished)
    return found
