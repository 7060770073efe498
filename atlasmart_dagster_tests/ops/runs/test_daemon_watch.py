"""A command waiting on the team's run queue notices a daemon that stopped, and the work it left is not lost.

The slow tests run a real ``dagster-daemon`` on a Postgres instance and
``atlasmart backfill`` as the operator types it:

* the daemon is killed (SIGKILL) 25 s after the backfill was queued: the
  command reports it within a minute, in one line, exit 1; the backfill stays
  REQUESTED in the instance and the ledger records the request SUBMITTED with
  it; once the daemon runs again, the same command waits for that backfill and
  succeeds, and no second backfill is queued;
* the daemon is stopped gracefully just before the submission, so its last
  heartbeat still looks fresh: the command is accepted, then reports the
  stopped daemon within a minute of the stop; run again while the daemon is
  still down, it is refused at once and queues nothing.

The fast tests cover the same watch on a real SQLite instance whose daemon
heartbeat records are written as a daemon writes them, without a daemon.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import dagster as dg
import pytest
from dagster._daemon.types import DaemonHeartbeat

from atlasmart_dagster.errors import UsageError
from atlasmart_dagster.ops.runs import queue as run_queue
from atlasmart_dagster.ops.runs.dagster_backfill_adapter import queue_asset_backfill
from atlasmart_dagster.ops.runs.queue import (
    HEARTBEAT_STALE_SECONDS,
    SUBMISSION_TAG,
    DaemonStopped,
    job_submission,
    launch_job_run,
    wait_for_backfill,
    wait_for_run,
)
from atlasmart_dagster_tests.team_database import BIN, REPO, team_daemon  # noqa: F401 - a fixture

DAY = "2026-09-17"


@dg.op
def _noop():
    return None


@dg.job
def probe_job():
    _noop()


def _queued(instance: dg.DagsterInstance, tags: dict) -> dg.DagsterRun:
    """A run of this module's job put on the queue as the UI does: with its code origin, then enqueued."""
    from dagster._core.events import DagsterEvent
    from dagster._core.test_utils import in_process_test_workspace
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    with in_process_test_workspace(instance, LoadableTargetOrigin(python_file=__file__, attribute="probe_job")) as ws:
        (entry,) = ws.get_code_location_entries().values()
        (repository,) = entry.code_location.get_repositories().values()
        remote = repository.get_full_job("probe_job")
    run = instance.create_run_for_job(probe_job, tags=tags, remote_job_origin=remote.get_remote_origin(),
                                      job_code_origin=remote.get_python_origin())
    instance.report_dagster_event(DagsterEvent.job_enqueue(run), run_id=run.run_id)
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.QUEUED
    return run


def _beat(instance: dg.DagsterInstance, age: float, daemon_type: str = "QUEUED_RUN_COORDINATOR") -> None:
    """A heartbeat record as dagster-daemon writes it, ``age`` seconds old."""
    instance.add_daemon_heartbeat(DaemonHeartbeat(time.time() - age, daemon_type, "test-daemon", []))


# --- fast: the watch on a real instance -----------------------------------------------------------


def test_a_queued_run_whose_daemon_stopped_beating_is_reported_a_started_one_is_waited_for():
    with dg.instance_for_test() as instance:
        # A started run goes on in its own process without the daemon: waited for, not reported.
        started_run = instance.create_run_for_job(probe_job, status=dg.DagsterRunStatus.STARTED)
        _beat(instance, HEARTBEAT_STALE_SECONDS + 30)
        ended = threading.Timer(1.0, lambda: instance.report_run_failed(instance.get_run_by_id(started_run.run_id)))
        ended.start()
        assert wait_for_run(instance, started_run.run_id, poll=0.2).status == dg.DagsterRunStatus.FAILURE

        # A queued run only the daemon can start.
        run = _queued(instance, {SUBMISSION_TAG: job_submission("probe_job", [DAY])})
        _beat(instance, HEARTBEAT_STALE_SECONDS - 2)  # fresh now, stale in 2 s: no newer beat comes
        started = time.monotonic()
        with pytest.raises(DaemonStopped) as stopped:
            wait_for_run(instance, run.run_id, poll=0.2)
        assert time.monotonic() - started < 10
        message = str(stopped.value)
        assert message.startswith("the dagster-daemon stopped heartbeating at ")
        assert f"run {run.run_id} (probe_job:{DAY}..{DAY}) was QUEUED: the run stays QUEUED" in message
        assert "dagster-daemon run -w deploy/workspace.yaml" in message and "Terminate" in message
        assert stopped.value.run_ids == [run.run_id]
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.QUEUED  # left as it was


def test_a_backfill_the_daemon_left_unfinished_is_reported_and_submitted_once(env):
    keys = [dg.AssetKey("agg_daily_sales"), dg.AssetKey("metric_gross_revenue")]
    tags = {"atlasmart/lane": "backfill"}
    with dg.instance_for_test() as instance:
        first = queue_asset_backfill(env.defs, instance, [DAY], keys, tags, "BF-0001", "first")
        again = queue_asset_backfill(env.defs, instance, [DAY], list(reversed(keys)), tags, "BF-0002", "again")
        other = queue_asset_backfill(env.defs, instance, ["2026-09-18"], keys, tags, "BF-0003", "another day")
        assert again == first and other != first
        assert len(instance.get_backfills()) == 2
        _beat(instance, HEARTBEAT_STALE_SECONDS + 1, "BACKFILL")
        with pytest.raises(DaemonStopped) as stopped:
            wait_for_backfill(instance, first, poll=0.2)
        assert f"Dagster backfill {first} was REQUESTED: it stays REQUESTED (its runs: none yet" in str(stopped.value)
        assert stopped.value.backfill_id == first


def test_the_same_run_submitted_again_is_waited_for_not_queued_twice():
    with dg.instance_for_test() as instance:
        earlier = _queued(instance, {SUBMISSION_TAG: job_submission("backfill_sales_job", [DAY, "2026-09-18"])})
        # No `dagster job launch` happens: the earlier run is the answer.
        assert launch_job_run("backfill_sales_job", [DAY, "2026-09-18"], {}, instance=instance) == earlier.run_id


def test_a_launch_that_fails_leaves_no_run_that_looks_queued(monkeypatch, tmp_path):
    with dg.instance_for_test() as instance:
        created = {}

        def failing_launch(command, **kwargs):
            run_id = command[command.index("--run-id") + 1]
            created["run"] = instance.create_run_for_job(probe_job, run_id=run_id,
                                                         status=dg.DagsterRunStatus.NOT_STARTED)
            return subprocess.CompletedProcess(command, 1, "", "dagster: error: the code location did not load")

        monkeypatch.setattr(run_queue.subprocess, "run", failing_launch)
        with pytest.raises(Exception, match="was created but never queued; marked failed"):
            launch_job_run("backfill_sales_job", [DAY], {}, instance=instance)
        assert instance.get_run_by_id(created["run"].run_id).status == dg.DagsterRunStatus.FAILURE


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "0", "soon"])
def test_a_queue_deadline_that_is_no_number_of_seconds_is_a_setting_error(monkeypatch, value):
    monkeypatch.setenv(run_queue.QUEUE_TIMEOUT_ENV, value)
    with dg.instance_for_test() as instance:
        with pytest.raises(UsageError, match="ATLASMART_QUEUE_TIMEOUT must be a positive number of seconds"):
            wait_for_run(instance, "no-such-run", poll=0.1)


# --- slow: a real dagster-daemon -------------------------------------------------------------------


def _backfill(shell: dict, reason: str) -> subprocess.Popen:
    return subprocess.Popen(
        [BIN / "atlasmart", "backfill", "--from", DAY, "--to", DAY, "--operator", "ci", "--reason", reason],
        env=shell, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _ledger_events(url: str) -> list[tuple]:
    import psycopg2

    with psycopg2.connect(url) as con, con.cursor() as cur:
        cur.execute("SELECT request_id, event, run_id, dagster_backfill_id FROM atlasmart_ledger.backfill_requests "
                    "ORDER BY id")
        return cur.fetchall()


def _error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith("atlasmart: ")]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


@pytest.mark.slow
def test_a_daemon_killed_after_the_backfill_was_queued_is_reported_within_a_minute(team_daemon):
    shell, instance, start_daemon = team_daemon.shell, team_daemon.instance, team_daemon.start_daemon
    daemon = start_daemon()
    command = _backfill(shell, "daemon killed")
    deadline = time.monotonic() + 180
    while not instance.get_backfills() and time.monotonic() < deadline:
        assert command.poll() is None, command.communicate()
        time.sleep(0.5)
    (queued,) = instance.get_backfills()
    time.sleep(25)
    os.kill(daemon.pid, signal.SIGKILL)
    killed = time.monotonic()
    out, err = command.communicate(timeout=240)  # before: still waiting, for ever
    reported_after = time.monotonic() - killed
    line = _error_line(err)
    assert command.returncode == 1, (out, err[-3000:])
    assert reported_after <= 60, f"reported {reported_after:.0f} s after the daemon died"
    assert line.startswith("atlasmart: error: the dagster-daemon stopped heartbeating at ")
    assert f"Dagster backfill {queued.backfill_id} was REQUESTED: it stays REQUESTED" in line
    assert "dagster-daemon run -w deploy/workspace.yaml" in line and "run again, then waits for it" in line
    # Left as it was: the backfill still requested; the ledger says where the request went.
    assert instance.get_backfill(queued.backfill_id).status.value == "REQUESTED"
    events = _ledger_events(shell["ATLASMART_DATABASE_URL"])
    assert [(e[1], e[3]) for e in events] == [("REQUESTED", None), ("SUBMITTED", queued.backfill_id)]

    # The daemon again: the same command collects that backfill, and queues no second one. The run the
    # killed daemon launched went on by itself, so the daemon back finishes the backfill at its first tick;
    # the command is run again only then, as an operator who restarted the daemon first would (whether it
    # came before that tick was a race: CI once saw the command submit the work a second time).
    start_daemon()
    deadline = time.monotonic() + 300
    while instance.get_backfill(queued.backfill_id).status.value == "REQUESTED" and time.monotonic() < deadline:
        time.sleep(1)
    again = _backfill(shell, "daemon killed, again")
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, (out, err[-3000:])
    assert f"Dagster backfill {queued.backfill_id} of the same days and assets, submitted earlier, was finished " \
           f"by the daemon since its command stopped waiting" in out
    assert [b.backfill_id for b in instance.get_backfills()] == [queued.backfill_id]
    assert instance.get_backfill(queued.backfill_id).status.value in ("COMPLETED", "COMPLETED_SUCCESS")
    (run,) = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": queued.backfill_id}))
    assert run.status == dg.DagsterRunStatus.SUCCESS
    finished = [e for e in _ledger_events(shell["ATLASMART_DATABASE_URL"]) if e[1] == "FINISHED"]
    assert [e[2] for e in finished] == [run.run_id]


@pytest.mark.slow
def test_a_daemon_stopped_gracefully_just_before_the_submission_is_reported_within_a_minute(team_daemon):
    shell, instance, start_daemon = team_daemon.shell, team_daemon.instance, team_daemon.start_daemon
    daemon = start_daemon()
    # Stop it just after a heartbeat, as an operator may: the newest heartbeat then looks fresh
    # for the longest time (its threads beat every 30 s, each at its own moment).
    while time.time() - max(b.timestamp for b in instance.get_daemon_heartbeats().values()) > 1.5:
        time.sleep(0.2)
    os.killpg(daemon.pid, signal.SIGTERM)  # as systemd stops it
    daemon.wait(timeout=120)
    stopped = time.monotonic()
    last_beat = max(b.timestamp for b in instance.get_daemon_heartbeats().values())
    time.sleep(2)
    command = _backfill(shell, "daemon stopped")
    out, err = command.communicate(timeout=240)  # before: accepted, then waiting for ever
    reported_after = time.monotonic() - stopped
    line = _error_line(err)
    assert command.returncode == 1, (out, err[-3000:])
    assert time.time() - last_beat > HEARTBEAT_STALE_SECONDS
    assert reported_after <= 60, f"reported {reported_after:.0f} s after the daemon stopped"
    # Its heartbeat still looked fresh, so the backfill was accepted (and is left requested).
    (queued,) = instance.get_backfills()
    assert f"Dagster backfill {queued.backfill_id} was REQUESTED: it stays REQUESTED" in line, line
    assert queued.status.value == "REQUESTED"

    # Run again while the daemon is still down: refused at once, nothing queued a second time.
    started = time.monotonic()
    again = _backfill(shell, "daemon stopped, again")
    out, err = again.communicate(timeout=120)
    assert again.returncode == 1 and time.monotonic() - started < 45, (out, err[-2000:])
    assert "no dagster-daemon is serving the run queue" in _error_line(err)
    assert [b.backfill_id for b in instance.get_backfills()] == [queued.backfill_id]
