"""Runs through the Dagster instance's run queue: how `atlasmart` starts work in a team deployment.

In the embedded home `atlasmart` executes a run in its own process and takes
the lane's lock. A team has many submitters on many machines (the UI,
schedules, sensors, the backfill daemon, several operators' `atlasmart`), so
there the lanes are enforced once, by the tag limits of the instance's run
queue (`deploy/dagster.yaml`), and `atlasmart` submits like the UI does and
waits for the outcome:

- **the whole chain** (a day or a range) is a run of ``daily_sales_job`` (the
  current lane) or ``backfill_sales_job`` (the backfill lane) launched with
  Dagster's own ``dagster job launch``, which loads the code location and puts
  the run on the queue, as the UI's job page does;
- **part of the chain** (``backfill --start-at``, a repair) is an asset
  backfill that the daemon turns into queued runs
  (``ops/runs/dagster_backfill_adapter.py``), as the asset graph's "Launch
  backfill" does (the backfill daemon looks at it on its next tick, up to
  30 s later).

Nothing runs unless a ``dagster-daemon`` serves the instance, so submission
first checks its heartbeat and refuses with what to start, instead of
leaving a run queued forever. While ``atlasmart`` waits, it keeps watching:
a daemon that stops heartbeating (killed, or stopped gracefully just before
the submission, when its last heartbeat still looked fresh) while the work
still needs it is reported within a minute, with the state the work is left
in and what to do (``DaemonStopped``). The work itself stays in the instance
(a queued run or a requested backfill is never withdrawn half way), and every
submission carries ``atlasmart/submission``: submitting the same work again
waits for the unfinished earlier one instead of queueing a second copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

import dagster as dg

from ...defs.partitions import PARTITION_TAG, range_tags
from ...errors import PermanentError, TransientError
from ...settings import Settings, current

QUEUE_TIMEOUT_ENV = Settings.queue_timeout.name
# Each thread of `dagster-daemon` (run queue, backfills, sensors, ...) writes a
# heartbeat every 30 s (Dagster's DEFAULT_HEARTBEAT_INTERVAL_SECONDS), all from
# one process. When none of them has beaten for this long the process is gone:
# killed, or stopped gracefully (which leaves its last heartbeat behind, looking
# fresh for up to 30 s). 30 s plus 20 s of slack for a loaded machine keeps the
# report within a minute of the daemon's end. Heartbeats carry the daemon
# machine's time and are compared with this one's, as Dagster itself does: keep
# the machines' clocks in sync (NTP).
HEARTBEAT_STALE_SECONDS = 50.0
# One thread may beat late while its process lives (the backfill thread while it
# evaluates a large backfill); a needed thread silent for this long is not serving.
HEARTBEAT_FRESH_SECONDS = 120
# Tag on every run and backfill `atlasmart` submits: what was asked (job or assets, days).
SUBMISSION_TAG = "atlasmart/submission"
_WAITING_FOR_QUEUE = {dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING}
_UNFINISHED = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
START_DAEMON = ("Start it again (`dagster-daemon run -w deploy/workspace.yaml` with the same DAGSTER_HOME and "
                "ATLASMART_DATABASE_URL)")
_FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
_BACKFILL_DONE = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}
CODE_LOCATION_MODULE = "atlasmart_dagster.definitions"
# The daemon only launches runs of a code location its workspace knows, by
# name: deploy/workspace.yaml names it so. ATLASMART_WORKSPACE points at the
# team's own workspace file when it differs.
CODE_LOCATION_NAME = "atlasmart_dagster"
WORKSPACE_ENV = Settings.workspace.name


class QueueUnavailable(PermanentError):
    """No daemon serves the instance's run queue, so a submitted run would never start."""

    kind = "queue_unavailable"


class DaemonStopped(QueueUnavailable):
    """The daemon stopped while submitted work still needed it; the work stays in the instance as it was."""

    kind = "daemon_stopped"

    def __init__(self, message: str, run_ids: Sequence[str] = (), backfill_id: str | None = None):
        super().__init__(message)
        self.run_ids = list(run_ids)
        self.backfill_id = backfill_id


def _utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def daemon_stopped_at(instance: dg.DagsterInstance) -> float | None:
    """When the daemon last beat, if it has stopped (no thread beat for ``HEARTBEAT_STALE_SECONDS``); else None."""
    beats = instance.get_daemon_heartbeats()
    if not beats:
        return 0.0
    last = max(beat.timestamp for beat in beats.values())
    return last if time.time() - last > HEARTBEAT_STALE_SECONDS else None


def require_daemon(instance: dg.DagsterInstance, needs: Sequence[str] = ("QUEUED_RUN_COORDINATOR",)) -> None:
    """Refuse unless the daemon lives and every thread in ``needs`` has beaten recently on ``instance``."""
    beats = instance.get_daemon_heartbeats()
    now = time.time()
    stale = [d for d in needs if d not in beats or now - beats[d].timestamp > HEARTBEAT_FRESH_SECONDS]
    stopped = daemon_stopped_at(instance)
    if stale or stopped is not None:
        last = f"; its last heartbeat was at {_utc(stopped)}" if stopped else ""
        raise QueueUnavailable(
            f"no dagster-daemon is serving the run queue of the instance at $DAGSTER_HOME (missing: "
            f"{', '.join(stale or needs)}{last}): start `dagster-daemon run -w deploy/workspace.yaml` with the same "
            f"DAGSTER_HOME and ATLASMART_DATABASE_URL, then submit again"
        )


def job_submission(job_name: str, partitions: Sequence[str]) -> str:
    """The ``atlasmart/submission`` value of a run of ``job_name`` over ``partitions``."""
    return f"{job_name}:{partitions[0]}..{partitions[-1]}"


def unfinished_run(instance: dg.DagsterInstance, submission: str) -> dg.DagsterRun | None:
    """The oldest queued or running run submitted for ``submission``, if any."""
    runs = instance.get_runs(dg.RunsFilter(tags={SUBMISSION_TAG: submission}, statuses=_UNFINISHED))
    return runs[-1] if runs else None


def launch_job_run(
    job_name: str, partitions: Sequence[str], tags: Mapping[str, str], instance: dg.DagsterInstance | None = None
) -> str:
    """Submit ``job_name`` for one day or a contiguous range to the queue (``dagster job launch``); its run id.

    A run of the same job and days that an earlier submission left queued or
    running (its waiting command ended: the daemon stopped, Ctrl-C) is waited
    for instead: no second copy. A launch that fails leaves no run behind that
    looks queued. ``instance`` defaults to the one at ``$DAGSTER_HOME``, where
    ``dagster job launch`` puts the run.
    """
    if instance is None and os.environ.get("DAGSTER_HOME"):
        with dg.DagsterInstance.get() as own:
            return launch_job_run(job_name, partitions, tags, own)
    submission = job_submission(job_name, partitions)
    earlier = unfinished_run(instance, submission) if instance is not None else None
    if earlier is not None:
        return earlier.run_id
    run_id = str(uuid.uuid4())
    if len(partitions) == 1:
        scope = {PARTITION_TAG: partitions[0]}
    else:
        scope = range_tags(partitions[0], partitions[-1])
    scope[SUBMISSION_TAG] = submission
    dagster = Path(sys.executable).parent / "dagster"
    with tempfile.TemporaryDirectory() as scratch:
        workspace = current().workspace or _workspace_file(Path(scratch))
        command = [str(dagster) if dagster.exists() else "dagster", "job", "launch", "-w", str(workspace),
                   "-j", job_name, "--run-id", run_id, "--tags", json.dumps({**tags, **scope})]
        done = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy(), timeout=600)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        left = _withdraw_unqueued(instance, run_id, last)
        raise TransientError(f"dagster job launch of {job_name} for {partitions[0]}..{partitions[-1]} failed: {last}"
                             + left)
    return run_id


def _withdraw_unqueued(instance: dg.DagsterInstance | None, run_id: str, why: str) -> str:
    """A run a failed launch created but never queued is marked failed (nothing would ever start it)."""
    run = instance.get_run_by_id(run_id) if instance is not None else None
    if run is None:
        return " (no run was created)"
    if run.status == dg.DagsterRunStatus.NOT_STARTED:
        instance.report_run_failed(run, f"its launch failed before it was queued: {why}")
        return f" (run {run_id} was created but never queued; marked failed)"
    return f" (run {run_id} is {run.status.value})"


def _workspace_file(folder: Path) -> Path:
    """A workspace naming the code location as deploy/workspace.yaml does."""
    path = folder / "workspace.yaml"
    path.write_text(
        "load_from:\n  - python_module:\n"
        f"      module_name: {CODE_LOCATION_MODULE}\n      location_name: {CODE_LOCATION_NAME}\n"
    )
    return path


def _timeout() -> float:
    return current().queue_timeout  # not a positive number of seconds: UsageError


def _stopped_message(stopped: float, what: str) -> str:
    last = f"at {_utc(stopped)} ({time.time() - stopped:.0f} s ago)" if stopped else "(it has never beaten here)"
    return f"the dagster-daemon stopped heartbeating {last} while {what}"


def wait_for_run(instance: dg.DagsterInstance, run_id: str, poll: float = 1.0) -> dg.DagsterRun:
    """Block until the run finishes (success, failure or cancellation).

    While the run waits in the queue (or is being started), only the daemon
    can move it: if the daemon stops, ``DaemonStopped`` says so within a
    minute. A run that has started goes on in its own process without the
    daemon, so it is waited for until the deadline.
    """
    timeout = _timeout()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = instance.get_run_by_id(run_id)
        if run is not None and run.status in _FINISHED:
            return run
        if run is not None and run.status in _WAITING_FOR_QUEUE:
            stopped = daemon_stopped_at(instance)
            if stopped is not None:
                state = run.status.value
                scope = run.tags.get(SUBMISSION_TAG, run.job_name)
                raise DaemonStopped(
                    _stopped_message(stopped, f"run {run_id} ({scope}) was {state}")
                    + f": the run stays {state}. {START_DAEMON} and the run continues; this command, "
                    f"run again, then waits for it instead of queueing another. Or cancel it in the UI (Runs, "
                    f"{run_id[:8]}, Terminate: a queued run needs no daemon for that)",
                    run_ids=[run_id],
                )
        time.sleep(poll)
    raise TransientError(f"run {run_id} did not finish within {timeout:.0f} s (${QUEUE_TIMEOUT_ENV}); it goes on")


def wait_for_backfill(instance: dg.DagsterInstance, backfill_id: str, poll: float = 1.0) -> list[dg.DagsterRun]:
    """Block until the backfill and every run it launched have finished; its runs, oldest first.

    Only the daemon launches a backfill's runs and marks it finished, so a
    daemon that stops before that is reported within a minute (``DaemonStopped``).
    """
    timeout = _timeout()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        backfill = instance.get_backfill(backfill_id)
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
        if backfill is not None and backfill.status.value in _BACKFILL_DONE and all(r.status in _FINISHED for r in runs):
            return sorted(runs, key=lambda r: instance.get_run_record_by_id(r.run_id).create_timestamp)
        stopped = daemon_stopped_at(instance)
        if stopped is not None:
            state = backfill.status.value if backfill is not None else "missing"
            made = ", ".join(f"{r.run_id[:8]} {r.status.value}" for r in runs) or "none yet"
            raise DaemonStopped(
                _stopped_message(stopped, f"Dagster backfill {backfill_id} was {state}")
                + f": it stays {state} (its runs: {made}; a started run goes on by itself). "
                f"{START_DAEMON} and the backfill continues; this command, run again, then waits for "
                f"it instead of submitting another. Or cancel it in the UI (Overview, Backfills, {backfill_id})",
                run_ids=[r.run_id for r in runs],
                backfill_id=backfill_id,
            )
        time.sleep(poll)
    raise TransientError(
        f"backfill {backfill_id} did not finish within {timeout:.0f} s (${QUEUE_TIMEOUT_ENV}); it goes on"
    )


def run_events(instance: dg.DagsterInstance, run_id: str) -> list[dg.DagsterEvent]:
    """The Dagster events of a finished run, in order (to explain its failures)."""
    return [e.dagster_event for e in instance.all_logs(run_id) if e.dagster_event is not None]
