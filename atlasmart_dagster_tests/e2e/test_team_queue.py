"""In a team deployment every `atlasmart` run goes through the instance's run queue.

The daemon serves a Postgres instance. `atlasmart demo` prints the same
figures as in the embedded home, but its runs were queued (they carry the
daemon's backfill tags). Then two submitters in different processes race:
`atlasmart backfill` (which queues an asset backfill and waits) and a UI-style
`dagster job launch` of the backfill job. The run records prove the backfill
lane's limit held: never more backfill-lane runs at once than it allows.
"""

from __future__ import annotations

import json
import subprocess
import time

import dagster as dg
import pytest
import yaml

from atlasmart_dagster.store.instance.dagster_instance import packaged_instance_config
from atlasmart_dagster_tests.team_database import BIN, REPO, team_daemon  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow


def test_cli_runs_are_queued_and_two_submitters_never_exceed_the_backfill_lane(team_daemon):
    shell, instance = team_daemon.shell, team_daemon.instance
    workspace = ["-w", str(REPO / "workspace.yaml")]

    def cli(*args, timeout=600):
        return subprocess.run([str(a) for a in args], env=shell, capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)

    # Without a daemon nothing would ever run: refused at once, with what to start.
    refused = cli(BIN / "atlasmart", "demo")
    assert refused.returncode == 1 and "no dagster-daemon is serving the run queue" in refused.stderr

    team_daemon.start_daemon()
    demo = cli(BIN / "atlasmart", "--json", "demo")
    assert demo.returncode == 0, (demo.stderr[-3000:], team_daemon.logs[-1].read_text()[-3000:])
    report = json.loads(demo.stdout)
    assert report["total"]["controls"] == {
        "paid_lines": 10, "orders": 8, "units": 12,
        "revenue_usd": "820.00", "cost_usd": "495.00", "gross_profit_usd": "325.00",
    }
    assert {p["state"] for p in report["partitions"]} == {"CERTIFIED"}
    # Each day was a queued run of the backfill job (in-process runs have no code origin).
    demo_runs = [r for r in instance.get_runs() if r.job_name == "backfill_sales_job"]
    assert len(demo_runs) == 5 and all(r.remote_job_origin is not None for r in demo_runs)
    assert all(r.tags["atlasmart/lane"] == "backfill" for r in demo_runs)

    # Two submitters in different processes at once.
    # --start-at: part of the chain, so an asset backfill the daemon turns into runs.
    ours = subprocess.Popen(
        [BIN / "atlasmart", "--json", "backfill", "--from", "2026-09-17", "--to", "2026-09-19",
         "--start-at", "fact_sales", "--operator", "ci", "--reason", "two submitters"],
        env=shell, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ui = cli(BIN / "dagster", "job", "launch", "-j", "backfill_sales_job", *workspace, "--tags", json.dumps({
        "dagster/asset_partition_range_start": "2026-09-20", "dagster/asset_partition_range_end": "2026-09-21",
        "atlasmart/lane": "backfill"}))
    assert ui.returncode == 0, ui.stderr[-2000:]
    out, err = ours.communicate(timeout=600)
    assert ours.returncode == 0, err[-3000:]
    assert json.loads(out)["success"] is True

    finished = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not all(r.status in finished for r in instance.get_runs()):
        time.sleep(2)
    records = instance.get_run_records()

    backfill_lane = [r for r in records if r.dagster_run.tags.get("atlasmart/lane") == "backfill"
                     or "dagster/backfill" in r.dagster_run.tags]
    assert all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in backfill_lane)
    assert len(backfill_lane) >= len(demo_runs) + 2
    limit = next(lim["limit"] for lim in yaml.safe_load(packaged_instance_config(team=True).read_text())
                 ["concurrency"]["runs"]["tag_concurrency_limits"] if lim.get("value") == "backfill")
    spans = sorted((r.start_time, r.end_time) for r in backfill_lane)
    most_at_once = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most_at_once <= limit, f"more backfill-lane runs at once than the lane's limit {limit}: {spans}"
