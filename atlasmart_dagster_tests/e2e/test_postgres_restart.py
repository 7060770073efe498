"""Postgres restarted under a backfill (its connections terminated, which is what a restart does to a client).

Every backend of the team's scratch database is terminated when the load's
``fact_sales`` step starts: the step's ledger and catalog connections die
mid-run. The step is retried within the storage retry window, and a rerun of
the same day converges on the same certified version.
"""

from __future__ import annotations

import pytest

from atlasmart_dagster.defs.assets.step import STEP_START_HOOKS, Step
from atlasmart_dagster.ops.runs.chains import run_chain, run_reference
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.team_database import _admin

pytestmark = pytest.mark.slow
DAY = "2026-09-18"


def _terminate_backends(database_url: str) -> int:
    """pg_terminate_backend on every other session of the database: what a server restart does to its clients."""
    name = database_url.rsplit("/", 1)[1]
    con = _admin()
    try:
        with con.cursor() as cur:
            cur.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            return cur.fetchone()[0]
    finally:
        con.close()


def test_a_postgres_restart_mid_backfill_is_retried_and_a_rerun_converges(tmp_path, team_deployment):
    env = Env(tmp_path)
    assert run_reference(env.defs, env.instance)
    terminated: list[int] = []

    def restart(step: Step) -> None:
        if step.asset == "fact_sales" and not terminated:
            terminated.append(_terminate_backends(team_deployment))

    STEP_START_HOOKS.append(restart)
    try:
        first = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
    finally:
        STEP_START_HOOKS.remove(restart)
    assert terminated and terminated[0] >= 1, "the ledger's sessions were cut mid-run"
    assert first.success, first
    retried = [e.event_type_value for e in first.result.all_events if e.step_key == "fact_sales"].count("STEP_RESTARTED")
    assert retried >= 1, "the cut sessions failed an attempt"
    assert [r["asset"] for r in env.ledger.runs.retries() if r["run_id"] == first.run_id] == ["fact_sales"] * retried
    served = env.ledger.partitions.served("mart_finance_daily_sales", DAY)
    rerun = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
    assert rerun.success, rerun
    again = env.ledger.partitions.served("mart_finance_daily_sales", DAY)
    # The rerun converged: the same content, still version 1, first served at the same moment.
    assert (again.version, again.certified_at, again.certification.detail.get("fingerprint")) == \
        (served.version, served.certified_at, served.certification.detail.get("fingerprint")) and served.version == 1
    env.platform.ledger.close()
