"""SIGKILL in the middle of a commit: no half-written partition, and a backup taken meanwhile restores."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from atlasmart_dagster.ops import recovery
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.published_controls import fingerprints_of
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster.store.ledger.partition_states import BUILT
from atlasmart_dagster.store.platform import Platform
from atlasmart_dagster.store.tables import FACT_SALES
from atlasmart_dagster_tests.environment import SAMPLE_DAYS
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

pytestmark = pytest.mark.slow
DAY = "2026-09-20"


def test_killed_mid_commit(env, tmp_path):
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").success
    certified_fact = fingerprints_of(env.warehouse, FACT_SALES, [DAY])[DAY]
    served = {a: env.ledger.partitions.served(a, DAY).certification.id for a in ("metric_gross_revenue", "mart_finance_daily_sales")}
    # a re-delivery makes the next load of the day change its content
    rows = read_rows(env.day_dir(DAY))
    write_batch(env.day_dir(DAY), [{**rows[2], "source_seq": 209, "line_amount_usd": "90.00"}], batch_id="ERP-20260920-02")

    marker = env.home / "locks" / "paused-before-commit-fact_sales"
    child = subprocess.Popen(
        [sys.executable, "-m", "atlasmart_dagster_tests.e2e.pause_before_commit", "fact_sales", "300",
         "--home", str(env.home), "--landing", str(env.landing),
         "--ephemeral-instance", "backfill", "--from", DAY, "--to", DAY, "--operator", "crash-test",
         "--reason", "restate the day"],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert child.poll() is None, "the run ended before reaching the commit"
            assert time.monotonic() < deadline, "the run never reached the fact_sales commit"
            time.sleep(0.2)
        # fact data files are written, the commit is not: back up now, then kill the step process
        manifest = recovery.backup(env.platform, tmp_path / "backups")
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)

    platform = Platform.open(home=env.home, landing=env.landing)
    # the table: the day is still exactly its certified content (orphan files are not part of any snapshot)
    assert fingerprints_of(platform.warehouse, FACT_SALES, [DAY])[DAY] == certified_fact
    # the ledger: consistent, and nothing from the killed run beyond what it had committed
    con = sqlite3.connect(env.home / "ledger.db")
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    killed = {e.run_id for e in platform.ledger.partitions.events(asset="stg_order_lines", states=(BUILT,))} - \
             {e.run_id for e in platform.ledger.partitions.events(asset="fact_sales", states=(BUILT,))}
    assert len(killed) == 1  # staging committed and was recorded; the fact commit never happened
    assert {a: platform.ledger.partitions.served(a, DAY).certification.id for a in served} == served
    result = recovery.verify(platform)
    assert result["certified_ok"]  # consumers are still served intact certified versions
    assert any(DAY in p for p in result["by_kind"]["layers"])  # and the interrupted day is flagged for a re-run

    # the backup taken during the commit restores to a consistent certified state
    recovery.restore(tmp_path / "backups" / manifest["backup_id"], platform.home, platform.clock.now())
    restored = Platform.open(home=env.home, landing=env.landing)
    assert recovery.verify(restored)["certified_ok"]
    assert {partition_status(restored, d).state for d in SAMPLE_DAYS} == {"CERTIFIED"}
    assert fingerprints_of(restored.warehouse, FACT_SALES, [DAY])[DAY] == certified_fact

    # re-running the interrupted day completes the restatement
    from atlasmart_dagster.definitions import build_definitions
    from atlasmart_dagster.defs.resources import AtlasmartResource

    resource = AtlasmartResource(home=str(env.home), landing=str(env.landing))
    rerun = run_chain(build_definitions(resource), env.instance, resource.platform, [DAY], lane="backfill")
    assert rerun.certified == [DAY] and recovery.verify(resource.platform)["ok"]
    assert str(resource.platform.ledger.partitions.served("mart_finance_daily_sales", DAY).certification.controls) == "(3, 2, 4, 225, 130, 95)"
