"""Runs whose process died are marked failed, so they release their lane.

``atlasmart`` executes runs in its own process (``execute_in_process``). If
that process is killed, Dagster never hears the end of the run: it stays
STARTED forever and holds its lane in the instance's run queue (one backfill
run at a time), and Dagster's run monitoring cannot help because the default
run launcher has no worker to ask about. So every run we execute carries
``atlasmart/worker`` = host, pid and the process's start time; a run on this
host whose process is gone (or whose pid now belongs to a younger process) is
reported failed through the instance's public API, with the reason.

``reap_dead_runs`` runs before every ``atlasmart`` run and in
``stale_run_sensor`` (once a minute in the daemon).
"""

from __future__ import annotations

import re

import os
import socket

import dagster as dg

WORKER_TAG = "atlasmart/worker"
_IN_PROGRESS = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.CANCELING]


def worker_tags() -> dict[str, str]:
    """The tag that names this process as the run's worker."""
    import psutil  # local: loading the code location does not need it (cold start)

    started = psutil.Process(os.getpid()).create_time()
    return {WORKER_TAG: f"{socket.gethostname()}:{os.getpid()}:{started:.3f}"}


def _alive(pid: int, started: float) -> bool:
    import psutil  # local: loading the code location does not need it (cold start)

    try:
        return abs(psutil.Process(pid).create_time() - started) < 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


# The failure a reaped run is given; on-call notifications recognise a dead run by it (``is_reaped``).
REAPED = "the process that executed this run (pid {pid} on {host}) is gone; marked failed to free its lane"
_REAPED_PATTERN = re.compile(re.escape(REAPED).replace(r"\{pid\}", r"\d+").replace(r"\{host\}", ".+"))


def is_reaped(failure_message: str) -> bool:
    """Whether a run failure is the one ``reap_dead_runs`` reports."""
    return bool(_REAPED_PATTERN.search(failure_message))


def reap_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Report every in-progress run whose worker process on this host is gone as failed; return their ids."""
    host = socket.gethostname()
    reaped = []
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=_IN_PROGRESS)):
        run = record.dagster_run
        worker = run.tags.get(WORKER_TAG)
        if not worker:
            continue  # launched by the daemon: Dagster's own run monitoring watches those
        worker_host, pid, started = worker.rsplit(":", 2)
        if worker_host != host or _alive(int(pid), float(started)):
            continue  # another machine's run, or still running
        instance.report_run_failed(run, REAPED.format(pid=pid, host=host))
        reaped.append(run.run_id)
    return reaped


@dg.sensor(
    name="stale_run_sensor",
    minimum_interval_seconds=60,
    # On by default: an install that never hears of trouble (or never frees a dead run's lane) is not working.
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Marks runs failed whose atlasmart process died (killed, crashed), so they stop holding their lane "
        "in the run queue. Runs the daemon launched are watched by Dagster's run monitoring instead."
    ),
)
def stale_run_sensor(context: dg.SensorEvaluationContext):
    reaped = reap_dead_runs(context.instance)
    if reaped:
        context.log.warning(f"marked failed (worker process gone): {', '.join(reaped)}")
        return dg.SkipReason(f"marked {len(reaped)} run(s) failed whose worker process was gone")
    return dg.SkipReason("every in-progress run has a live worker")
