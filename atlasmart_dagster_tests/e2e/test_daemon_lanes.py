"""Through the daemon: range backfills in the backfill lane, lane limits of dagster.yaml observed."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from atlasmart_dagster.store.instance.dagster_instance import packaged_instance_config
from atlasmart_dagster_tests.environment import Env

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CHAIN = ("raw_order_lines,stg_order_lines,quarantine_order_lines,fact_sales,agg_daily_sales,"
         "metric_gross_revenue,mart_finance_daily_sales,mart_executive_revenue")

pytestmark = pytest.mark.slow


def shell_env(env: Env, dagster_home: Path) -> dict:
    return {**os.environ, "ATLASMART_HOME": str(env.home), "ATLASMART_LANDING": str(env.landing),
            "DAGSTER_HOME": str(dagster_home), "PYTHONUNBUFFERED": "1"}


def test_partition_range_through_dagster_asset_materialize(env, tmp_path):
    home = tmp_path / "dh"
    home.mkdir()
    (home / "dagster.yaml").write_text(packaged_instance_config().read_text())
    result = subprocess.run(
        [BIN / "dagster", "asset", "materialize", "-m", "atlasmart_dagster", "--select", CHAIN,
         "--partition-range", "2026-09-17...2026-09-21"],
        env=shell_env(env, home), capture_output=True, text=True, timeout=600, cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("RUN_START") == 1  # one run for the whole range
    from atlasmart_dagster.product.published_controls import controls_of
    from atlasmart_dagster.store.tables import FACT_SALES

    controls = controls_of(env.warehouse, FACT_SALES, ["2026-09-17", "2026-09-21"])
    assert str(controls["2026-09-17"]) == "(1, 1, 1, 80, 50, 30)" and str(controls["2026-09-21"]) == "(1, 1, 1, 60, 35, 25)"


def test_daemon_runs_backfills_one_at_a_time_beside_the_current_lane(env, tmp_path):
    import dagster as dg

    home = tmp_path / "dh"
    home.mkdir()
    (home / "dagster.yaml").write_text(packaged_instance_config().read_text())
    shell = shell_env(env, home)
    workspace = ["-w", str(REPO / "workspace.yaml")]

    def cli(*args, timeout=300):
        out = subprocess.run(list(args), env=shell, capture_output=True, text=True, timeout=timeout, cwd=REPO)
        assert out.returncode == 0, (args, out.stdout[-2000:], out.stderr[-3000:])
        return out.stdout

    ids = [json.loads(cli(BIN / "atlasmart", "--json", "backfill", "--via-daemon", "--from", start, "--to", end,
                          "--operator", "ci", "--reason", "daemon lane test"))["dagster_backfill_id"]
           for start, end in (("2026-09-17", "2026-09-18"), ("2026-09-19", "2026-09-20"))]
    cli(BIN / "dagster", "job", "launch", "-j", "daily_sales_job", *workspace, "--tags",
        json.dumps({"dagster/partition": "2026-09-21", "atlasmart/lane": "current"}))
    cli(BIN / "dagster", "sensor", "start", "certification_sensor", *workspace)

    daemon = subprocess.Popen([BIN / "dagster-daemon", "run", *workspace], env=shell, cwd=REPO,
                              stdout=open(tmp_path / "daemon.log", "w"), stderr=subprocess.STDOUT)
    try:
        instance = dg.DagsterInstance.from_config(str(home))
        deadline = time.monotonic() + 420
        finished = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE)
        while time.monotonic() < deadline:
            all_runs = instance.get_runs()
            certified = {e.partition for e in env.ledger.partitions.events(states=("CERTIFIED",)) if e.asset.startswith("dashboard_")}
            if len(all_runs) >= 6 and all(r.status in finished for r in all_runs) and len(certified) == 5:
                break
            time.sleep(3)
        time.sleep(35)  # one more sensor interval: nothing further may be launched
        all_runs = instance.get_runs()
        log = (tmp_path / "daemon.log").read_text()[-3000:]
        runs = [r for r in all_runs if r.job_name != "dashboard_checks_job"]
        golden_runs = [r for r in all_runs if r.job_name == "dashboard_checks_job"]
        assert sorted(r.status.value for r in runs) == ["SUCCESS"] * 3, log
        # certification_sensor asks for the dashboards' golden checks once per certifying run, never after them
        assert sorted(r.status.value for r in golden_runs) == ["SUCCESS"] * 3, log
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)

    records = {r.dagster_run.run_id: r for r in instance.get_run_records()}
    backfill_runs = [r for r in runs if "dagster/backfill" in r.tags]
    assert sorted(r.tags["dagster/backfill"] for r in backfill_runs) == sorted(ids)
    assert all(r.tags["atlasmart/lane"] == "backfill" for r in backfill_runs)
    # single-run backfill policy: each two-day range was one run
    assert sorted((r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"])
                  for r in backfill_runs) == [("2026-09-17", "2026-09-18"), ("2026-09-19", "2026-09-20")]
    spans = sorted((records[r.run_id].start_time, records[r.run_id].end_time) for r in backfill_runs)
    assert spans[0][1] <= spans[1][0], f"backfill runs overlapped: {spans}"  # dagster/backfill limit 1
    certified = {e.partition for e in env.ledger.partitions.events(states=("CERTIFIED",))}
    assert certified == {"2026-09-17", "2026-09-18", "2026-09-19", "2026-09-20", "2026-09-21"}
