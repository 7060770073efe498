"""The team deployment's stores: the ledger and the catalog in Postgres, data in the shared folder.

Against the real PostgreSQL (a scratch database per test). Proves the state
really lives where team mode says (nothing in the home folder), that the
database itself refuses edits of the ledger, that locks hold across processes
through the database, and that a team home certifies the same fingerprints as
the embedded one.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from datetime import datetime, timezone

import psycopg2
import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.errors import LaneViolation, UsageError
from atlasmart_dagster.store.home import AtlasmartHome
from atlasmart_dagster.store.ledger import Ledger
from atlasmart_dagster.store.ledger.postgres_engine import SCHEMA
from atlasmart_dagster.store.locks import lane_lock
from atlasmart_dagster.store.tables import FACT_SALES
from atlasmart_dagster.store.warehouse import Warehouse
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.team_database import scratch_database


def _status(env: Env, capsys) -> dict[str, list]:
    assert main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", "demo"]) == 0
    capsys.readouterr()
    assert main(["--home", str(env.home), "--landing", str(env.landing), "--json", "status"]) == 0
    return {p["partition"]: p for p in json.loads(capsys.readouterr().out)}


def _fingerprints(status: dict[str, dict]) -> dict:
    return {
        day: sorted((a["asset"], a["fingerprint"], json.dumps(a["controls"], sort_keys=True)) for a in p["assets"])
        for day, p in status.items()
    }


def test_team_home_keeps_state_in_postgres_and_the_shared_folder_with_the_same_fingerprints(
    tmp_path, monkeypatch, capsys
):
    embedded = _status(Env(tmp_path / "embedded"), capsys)
    assert (tmp_path / "embedded" / "home" / "ledger.db").exists()

    with scratch_database() as url:
        shared = tmp_path / "shared"
        monkeypatch.setenv("ATLASMART_DATABASE_URL", url)
        monkeypatch.setenv("ATLASMART_WAREHOUSE", str(shared))
        team_env = Env(tmp_path / "team")
        team = _status(team_env, capsys)

        home = tmp_path / "team" / "home"
        assert not (home / "ledger.db").exists() and not (home / "catalog.db").exists()
        assert not (home / "warehouse").exists() and not (home / "raw").exists()
        assert any((shared / "warehouse").rglob("*.parquet")) and any((shared / "raw").rglob("*"))
        con = psycopg2.connect(url)
        with con.cursor() as cur:
            cur.execute(f"SELECT count(*) FROM {SCHEMA}.partition_events WHERE state = 'CERTIFIED'")
            assert cur.fetchone()[0] > 0
            cur.execute("SELECT count(*) FROM iceberg_tables")
            assert cur.fetchone()[0] >= 6
        con.close()
        team_env.platform.ledger.close()

    assert set(team) == set(embedded)
    assert {p["state"] for p in team.values()} == {"CERTIFIED"}
    assert _fingerprints(team) == _fingerprints(embedded)


@pytest.mark.parametrize("statement", ["UPDATE {t} SET partition = 'x'", "DELETE FROM {t}", "TRUNCATE {t}"])
def test_the_database_refuses_edits_of_the_ledger(team_deployment, statement):
    ledger = Ledger(team_deployment)
    ledger.runs.record_phase("run-1", "2026-09-20", "started", datetime(2026, 9, 20, tzinfo=timezone.utc), "current")
    con = psycopg2.connect(team_deployment)
    with con.cursor() as cur, pytest.raises(psycopg2.Error, match="append-only"):
        cur.execute(statement.format(t=f"{SCHEMA}.run_phases"))
    con.rollback()
    with con.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {SCHEMA}.run_phases")
        assert cur.fetchone()[0] == 1
    con.close()
    ledger.close()


def test_a_failed_transaction_leaves_nothing(team_deployment):
    ledger = Ledger(team_deployment)
    with pytest.raises(RuntimeError), ledger.transaction():
        ledger.runs.record_phase("run-1", "2026-09-20", "started", datetime(2026, 9, 20, tzinfo=timezone.utc), "current")
        raise RuntimeError("crash between two appends")
    assert ledger.runs.phases("run-1") == []
    ledger.close()


def _allocate(url: str, queue) -> None:
    ledger = Ledger(url)
    queue.put([ledger.allocate_id("INC") for _ in range(10)])


def test_ids_are_unique_across_processes(team_deployment):
    queue = multiprocessing.get_context("spawn").Queue()
    workers = [multiprocessing.get_context("spawn").Process(target=_allocate, args=(team_deployment, queue))
               for _ in range(3)]
    for w in workers:
        w.start()
    ids = [i for _ in workers for i in queue.get(timeout=120)]
    for w in workers:
        w.join(timeout=60)
    assert len(ids) == 30 and len(set(ids)) == 30


def _hold_lane(url: str, shared: str, held, release) -> None:
    os.environ.update(ATLASMART_DATABASE_URL=url, ATLASMART_WAREHOUSE=shared)
    with lane_lock(AtlasmartHome.resolve("/tmp/other-machine-home"), "backfill"):
        held.set()
        release.wait(60)


def test_the_backfill_lane_lock_holds_across_processes_through_the_database(team_deployment, tmp_path):
    ctx = multiprocessing.get_context("spawn")
    held, release = ctx.Event(), ctx.Event()
    other = ctx.Process(target=_hold_lane, args=(team_deployment, os.environ["ATLASMART_WAREHOUSE"], held, release))
    other.start()
    try:
        assert held.wait(60)
        # A different home folder: only the database can know the lane is taken.
        home = AtlasmartHome.resolve(tmp_path / "this-machine-home")
        with pytest.raises(LaneViolation, match="the backfill lane is busy .*atlasmart lock backfill"):
            with lane_lock(home, "backfill"):
                pass
    finally:
        release.set()
        other.join(60)
    with lane_lock(AtlasmartHome.resolve(tmp_path / "this-machine-home"), "backfill", wait_seconds=10):
        pass  # released when the holder's session ended


def test_the_catalog_lock_serialises_first_use_by_threads(team_deployment, tmp_path):
    errors = []

    def create() -> None:
        try:
            Warehouse(AtlasmartHome.resolve(tmp_path / "home")).table(FACT_SALES)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize("only", ["ATLASMART_DATABASE_URL", "ATLASMART_WAREHOUSE"])
def test_half_a_team_setting_is_a_usage_error(monkeypatch, tmp_path, only):
    monkeypatch.delenv("ATLASMART_DATABASE_URL", raising=False)
    monkeypatch.delenv("ATLASMART_WAREHOUSE", raising=False)
    monkeypatch.setenv(only, "postgresql://x@127.0.0.1/db" if only.endswith("URL") else str(tmp_path))
    with pytest.raises(UsageError, match="needs both"):
        AtlasmartHome.resolve(tmp_path)


def test_a_non_postgres_url_is_a_usage_error(monkeypatch, tmp_path):
    monkeypatch.setenv("ATLASMART_DATABASE_URL", "mysql://x@127.0.0.1/db")
    monkeypatch.setenv("ATLASMART_WAREHOUSE", str(tmp_path))
    with pytest.raises(UsageError, match="postgresql://"):
        AtlasmartHome.resolve(tmp_path)


def test_postgres_errors_are_classified_for_retries(team_deployment):
    from atlasmart_dagster.errors import is_transient

    con = psycopg2.connect(team_deployment)
    with con.cursor() as cur, pytest.raises(psycopg2.Error) as bad_sql:
        cur.execute("SELEC 1")
    con.close()
    assert not is_transient(bad_sql.value)
    with pytest.raises(psycopg2.OperationalError) as unreachable:
        psycopg2.connect("postgresql://nobody@127.0.0.1:1/none", connect_timeout=2)
    assert is_transient(unreachable.value)


def test_drills_rehearse_on_an_embedded_scratch_home_even_in_a_team_deployment(team_deployment, tmp_path):
    from atlasmart_dagster.drills.harness import DrillWorld

    world = DrillWorld(tmp_path / "drill", ephemeral_instance=True)
    world.platform.ledger.runs.record_phase("r", "2026-09-20", "started", datetime(2026, 9, 20, tzinfo=timezone.utc),
                                            "current")
    assert not world.platform.home.team
    assert (tmp_path / "drill" / "home" / "ledger.db").exists()
    con = psycopg2.connect(team_deployment)
    with con.cursor() as cur:
        cur.execute("SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", (SCHEMA,))
        assert cur.fetchone()[0] == 0  # the team's database was never touched
    con.close()
