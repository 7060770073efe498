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
  (``ops/dagster_backfill_adapter.py``), as the asset graph's "Launch
  backfill" does (the backfill daemon looks at it on its next tick, up to
  30 s later).

Nothing runs unless a ``dagster-daemon`` serves the instance, so submission
first checks its heartbeat and refuses with what to start, instead of
leaving a run queued forever.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Mapping, Sequence

import dagster as dg

from ..defs.partitions import PARTITION_TAG, range_tags
from ..errors import PermanentError, TransientError

QUEUE_TIMEOUT_ENV = "ATLASMART_QUEUE_TIMEOUT"
# A daemon that has not beaten for this long is not serving the queue.
HEARTBEAT_FRESH_SECONDS = 120
_FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
_BACKFILL_DONE = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}
CODE_LOCATION_MODULE = "atlasmart_dagster.definitions"
# The daemon only launches runs of a code location its workspace knows, by
# name: deploy/workspace.yaml names it so. ATLASMART_WORKSPACE points at the
# team's own workspace file when it differs.
CODE_LOCATION_NAME = "atlasmart_dagster"
WORKSPACE_ENV = "ATLASMART_WORKSPACE"


class QueueUnavailable(PermanentError):
    """No daemon serves the instance's run queue, so a submitted run would never start."""

    kind = "queue_unavailable"


def require_daemon(instance: dg.DagsterInstance, needs: Sequence[str] = ("QUEUED_RUN_COORDINATOR",)) -> None:
    """Refuse unless every daemon in ``needs`` has beaten recently on ``instance``."""
    beats = instance.get_daemon_heartbeats()
    now = time.time()
    stale = [d for d in needs if d not in beats or now - beats[d].timestamp > HEARTBEAT_FRESH_SECONDS]
    if stale:
        raise QueueUnavailable(
            f"no dagster-daemon is serving the run queue of the instance at $DAGSTER_HOME (missing: "
            f"{', '.join(stale)}): start `dagster-daemon run -w deploy/workspace.yaml` with the same "
            f"DAGSTER_HOME and ATLASMART_DATABASE_URL, then submit again"
        )


def launch_job_run(job_name: str, partitions: Sequence[str], tags: Mapping[str, str]) -> str:
    """Submit ``job_name`` for one day or a contiguous range to the queue (``dagster job launch``); its run id."""
    run_id = str(uuid.uuid4())
    if len(partitions) == 1:
        scope = {PARTITION_TAG: partitions[0]}
    else:
        scope = range_tags(partitions[0], partitions[-1])
    dagster = Path(sys.executable).parent / "dagster"
    with tempfile.TemporaryDirectory() as scratch:
        workspace = os.environ.get(WORKSPACE_ENV) or _workspace_file(Path(scratch))
        command = [str(dagster) if dagster.exists() else "dagster", "job", "launch", "-w", str(workspace),
                   "-j", job_name, "--run-id", run_id, "--tags", json.dumps({**tags, **scope})]
        done = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy(), timeout=600)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise TransientError(f"dagster job launch of {job_name} for {partitions[0]}..{partitions[-1]} failed: {last}")
    return run_id


def _workspace_file(folder: Path) -> Path:
    """A workspace naming the code location as deploy/workspace.yaml does."""
    path = folder / "workspace.yaml"
    path.write_text(
        "load_from:\n  - python_module:\n"
        f"      module_name: {CODE_LOCATION_MODULE}\n      location_name: {CODE_LOCATION_NAME}\n"
    )
    return path


def _timeout() -> float:
    return float(os.environ.get(QUEUE_TIMEOUT_ENV, "3600"))


def wait_for_run(instance: dg.DagsterInstance, run_id: str, poll: float = 1.0) -> dg.DagsterRun:
    """Block until the run finishes (success, failure or cancellation)."""
    deadline = time.monotonic() + _timeout()
    while time.monotonic() < deadline:
        run = instance.get_run_by_id(run_id)
        if run is not None and run.status in _FINISHED:
            return run
        time.sleep(poll)
    raise TransientError(f"run {run_id} did not finish within {_timeout():.0f} s (${QUEUE_TIMEOUT_ENV}); it goes on")


def wait_for_backfill(instance: dg.DagsterInstance, backfill_id: str, poll: float = 1.0) -> list[dg.DagsterRun]:
    """Block until the backfill and every run it launched have finished; its runs, oldest first."""
    deadline = time.monotonic() + _timeout()
    while time.monotonic() < deadline:
        backfill = instance.get_backfill(backfill_id)
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
        if backfill is not None and backfill.status.value in _BACKFILL_DONE and all(r.status in _FINISHED for r in runs):
            return sorted(runs, key=lambda r: instance.get_run_record_by_id(r.run_id).create_timestamp)
        time.sleep(poll)
    raise TransientError(
        f"backfill {backfill_id} did not finish within {_timeout():.0f} s (${QUEUE_TIMEOUT_ENV}); it goes on"
    )


def run_events(instance: dg.DagsterInstance, run_id: str) -> list[dg.DagsterEvent]:
    """The Dagster events of a finished run, in order (to explain its failures)."""
    return [e.dagster_event for e in instance.all_logs(run_id) if e.dagster_event is not None]
