"""The team deployment end to end: Postgres instance, daemon, Celery worker processes, a killed worker.

A 30-day range backfill is submitted with ``atlasmart backfill --via-daemon``;
the daemon splits it into runs of 10 days (``ATLASMART_BACKFILL_RUN_DAYS``),
the run queue starts them under the team instance's lane limits, and every
step executes on one of two ``dagster-celery`` workers (started as the README
says, ``python -m atlasmart_dagster.ops.runs.celery_worker``), all against one
Postgres database (Dagster instance, Iceberg catalog, ledger) and one shared
folder, or (``[team-s3]``) one prefix on a real S3 server. Mid-run one worker
is killed with SIGKILL while it executes a step: the broker (RabbitMQ) hands
that step to the other worker, which runs it again. Every certified day must carry the fingerprint the embedded mode gives
for the same landing zone (no half partition survives the kill), and the
lanes must hold in the run records.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.store.instance.dagster_instance import packaged_instance_config
from atlasmart_dagster_tests.s3_server import team_warehouse
from atlasmart_dagster_tests.team_database import scratch_database

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DAYS = 30
RECEIVED = re.compile(r"Task execute_plan\[([0-9a-f-]+)\] received")
SUCCEEDED = re.compile(r"Task execute_plan\[([0-9a-f-]+)\] succeeded")
FIRST, LAST = "2026-09-17", "2026-10-16"

pytestmark = pytest.mark.slow


def _fingerprints(status: list[dict]) -> dict:
    return {
        p["partition"]: sorted((a["asset"], a["fingerprint"]) for a in p["assets"] if a.get("fingerprint"))
        for p in status
    }


def _status(shell: dict) -> list[dict]:
    out = subprocess.run([BIN / "atlasmart", "--json", "status"], env=shell, capture_output=True, text=True,
                         timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("warehouse", ["team", "team-s3"])
def test_thirty_days_split_into_runs_on_two_celery_workers_match_the_embedded_mode(tmp_path, capsys, monkeypatch,
                                                                                   warehouse):
    landing = tmp_path / "gen"
    assert main(["generate", "--days", str(DAYS), "--rows", "2000", "--start", FIRST, "--out", str(landing)]) == 0
    capsys.readouterr()

    # The embedded reference: the same landing zone, one in-process run.
    embedded = {**os.environ, "ATLASMART_HOME": str(tmp_path / "embedded"), "ATLASMART_LANDING": str(landing / "landing")}
    for key in ("ATLASMART_DATABASE_URL", "ATLASMART_WAREHOUSE", "DAGSTER_HOME"):
        embedded.pop(key, None)
    out = subprocess.run([BIN / "atlasmart", "--ephemeral-instance", "backfill", "--from", FIRST, "--to", LAST,
                          "--operator", "ci", "--reason", "embedded reference"],
                         env=embedded, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    reference = _fingerprints(_status(embedded))
    assert len(reference) == DAYS

    with scratch_database() as url, team_warehouse(warehouse, tmp_path) as data_place:
        dagster_home = tmp_path / "dagster"
        dagster_home.mkdir()
        (dagster_home / "dagster.yaml").write_text(packaged_instance_config(team=True).read_text())
        shell = {
            **embedded,
            "ATLASMART_HOME": str(tmp_path / "team-home"),
            "ATLASMART_DATABASE_URL": url,
            **data_place,
            "DAGSTER_HOME": str(dagster_home),
            "ATLASMART_EXECUTOR": "celery",
            # RabbitMQ: it hands a dead worker's unacknowledged step back at once
            # (Redis would wait for its visibility timeout, an hour by default).
            "ATLASMART_CELERY_BROKER": "amqp://guest:guest@127.0.0.1:5672//",
            # A queue of its own, so no other test's (or leftover) worker takes these steps.
            "ATLASMART_CELERY_QUEUE": f"atlasmart-test-{os.getpid()}-{time.time_ns()}",
            "ATLASMART_BACKFILL_RUN_DAYS": "10",
            "PYTHONUNBUFFERED": "1",
            # dagster-celery starts the `celery` command of this environment.
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        workspace = ["-w", str(REPO / "workspace.yaml")]
        logs = []

        def start(name: str, *args: str) -> subprocess.Popen:
            log = open(tmp_path / f"{name}.log", "w")
            logs.append(tmp_path / f"{name}.log")
            return subprocess.Popen([*args], env=shell, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)

        # Processes are started in their own session, so a SIGKILL of the group takes a worker's pool too.
        processes = [
            start("worker-1", BIN / "python", "-m", "atlasmart_dagster.ops.runs.celery_worker", "-y",
                  str(REPO / "deploy" / "celery.yaml"), "-n", "worker-1", "-q", shell["ATLASMART_CELERY_QUEUE"],
                  "-l", "info"),
            start("worker-2", BIN / "python", "-m", "atlasmart_dagster.ops.runs.celery_worker", "-y",
                  str(REPO / "deploy" / "celery.yaml"), "-n", "worker-2", "-q", shell["ATLASMART_CELERY_QUEUE"],
                  "-l", "info"),
        ]
        try:
            submitted = subprocess.run(
                [BIN / "atlasmart", "--json", "backfill", "--via-daemon", "--from", FIRST, "--to", LAST,
                 "--operator", "ci", "--reason", "team deployment test"],
                env=shell, capture_output=True, text=True, timeout=300, cwd=REPO)
            assert submitted.returncode == 0, submitted.stderr[-3000:]
            subprocess.run([BIN / "dagster", "sensor", "start", "certification_sensor", *workspace], env=shell,
                           capture_output=True, timeout=300, cwd=REPO, check=True)
            processes.append(start("daemon", BIN / "dagster-daemon", "run", *workspace))

            # Kill worker-1 (and its pool) with SIGKILL while it holds a step it has not finished.
            killed_task = None
            deadline = time.monotonic() + 600
            while killed_task is None and time.monotonic() < deadline:
                log = (tmp_path / "worker-1.log").read_text()
                open_tasks = set(RECEIVED.findall(log)) - set(SUCCEEDED.findall(log))
                if open_tasks:
                    os.killpg(processes[0].pid, 9)
                    processes[0].wait(timeout=60)
                    killed_task = open_tasks.pop()
                time.sleep(0.1)
            assert killed_task is not None, (tmp_path / "worker-1.log").read_text()[-2000:]

            monkeypatch.setenv("ATLASMART_DATABASE_URL", url)  # the team dagster.yaml reads it
            instance = dg.DagsterInstance.from_config(str(dagster_home))
            finished = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                runs = [r for r in instance.get_runs() if "dagster/backfill" in r.tags]
                if len(runs) >= DAYS // 10 and all(r.status in finished for r in runs):
                    if any(r.status != dg.DagsterRunStatus.SUCCESS for r in runs):
                        break  # nothing more will certify: the assertion below shows the processes' logs now
                    status = _status(shell)
                    if all(p["state"] == "CERTIFIED" for p in status) and len(status) == DAYS:
                        break
                time.sleep(5)
            tails = "\n".join(f"== {p.name}\n{p.read_text()[-1500:]}" for p in logs)
            assert [r.status for r in runs] == [dg.DagsterRunStatus.SUCCESS] * (DAYS // 10), tails
            team = _fingerprints(_status(shell))
        finally:
            for process in processes:
                _stop(process)

        records = instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": runs[0].tags["dagster/backfill"]}))
        instance.dispose()

    assert team == reference  # every day's fingerprint equals the embedded mode's
    # The range was split into runs of 10 days, all in the backfill lane.
    ranges = sorted((r.dagster_run.tags["dagster/asset_partition_range_start"],
                     r.dagster_run.tags["dagster/asset_partition_range_end"]) for r in records)
    assert ranges == [("2026-09-17", "2026-09-26"), ("2026-09-27", "2026-10-06"), ("2026-10-07", "2026-10-16")]
    assert all(r.dagster_run.tags.get("atlasmart/lane", "backfill") == "backfill" for r in records)
    # Steps ran on both workers, and the step killed on worker-1 was run again, to success, on worker-2.
    worker_logs = [(tmp_path / f"worker-{i}.log").read_text() for i in (1, 2)]
    assert all("execute_plan" in log for log in worker_logs), [log[-800:] for log in worker_logs]
    assert killed_task not in SUCCEEDED.findall(worker_logs[0])
    assert killed_task in SUCCEEDED.findall(worker_logs[1]), worker_logs[1][-2000:]
    # The runs of the range ran side by side, never more at once than the team's backfill lane allows.
    limit = next(lim["limit"] for lim in instance_limits(dagster_home) if lim.get("value") == "backfill")
    spans = sorted((r.start_time, r.end_time) for r in records)
    overlap = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert overlap <= limit, spans
    assert overlap >= 2, f"the runs of the range never ran side by side: {spans}"


def _stop(process: subprocess.Popen) -> None:
    """End a process group started above (a killed worker's group is already gone)."""
    try:
        os.killpg(process.pid, 15)
        process.wait(timeout=60)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.wait(timeout=60)
    # The daemon's code server outlived a graceful stop of its group (orphaned, its
    # children spinning): whatever is left of the group goes too.
    try:
        os.killpg(process.pid, 9)
    except ProcessLookupError:
        pass


def instance_limits(dagster_home: Path) -> list[dict]:
    import yaml

    config = yaml.safe_load((dagster_home / "dagster.yaml").read_text())
    return config["concurrency"]["runs"]["tag_concurrency_limits"]
