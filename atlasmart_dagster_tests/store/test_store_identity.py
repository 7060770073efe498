"""Every store is checked before it is trusted: a lost or replaced store is refused, never answered as empty.

Through the real command line (in-process) and through ``Platform``. One
sample home is loaded once per module; each test gets it back intact at the
same path (Iceberg metadata holds absolute paths) and damages it as an
operator would: moves ``catalog.db`` away, removes ``ledger.db``, copies in
another home's catalog, loses ``raw/`` or ``warehouse/``, moves the whole home.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from pathlib import Path
from types import SimpleNamespace

import psycopg2
import pytest

from atlasmart_dagster.errors import SnapshotMissing, StoreForeign, StoreMissing
from atlasmart_dagster.product.serving import read_certified
from atlasmart_dagster.store.ledger.postgres_engine import SCHEMA
from atlasmart_dagster.store.platform import Platform
from atlasmart_dagster.store.tables import MART_FINANCE_DAILY_SALES
from atlasmart_dagster.store.warehouse import HOME_ID_PROPERTY
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.store.damaged_home import BACKFILL, QUERY, demo_home, one_line, run
from atlasmart_dagster_tests.team_database import scratch_database


def ids(home: Path) -> tuple[list[str], list[str]]:
    """The home ids the ledger and the catalog record."""
    with sqlite3.connect(home / "ledger.db") as con:
        ledger = [r[0] for r in con.execute("SELECT home_id FROM home_identity")]
    with sqlite3.connect(home / "catalog.db") as con:
        catalog = [r[0] for r in con.execute(
            "SELECT property_value FROM iceberg_namespace_properties WHERE property_key = ?", (HOME_ID_PROPERTY,))]
    return ledger, catalog


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The sample loaded and certified with ``atlasmart demo`` in an embedded home, and a pristine copy of it."""
    root = tmp_path_factory.mktemp("identity")
    env = demo_home(root)
    shutil.copytree(env.home, root / "pristine")
    return SimpleNamespace(home=env.home, landing=env.landing, pristine=root / "pristine", root=root)


def _gone_already(function, path, exc_info):
    """rmtree's error handler: a file gone by the time it is removed is fine. The previous test's SQLite
    connection, closed by the collector mid-removal, deletes its own ``-shm`` and ``-wal`` files."""
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


@pytest.fixture
def home(sample, embedded):
    """The loaded sample home, intact, at its own path (for this test to damage)."""
    if sample.home.exists():
        shutil.rmtree(sample.home, onerror=_gone_already)
    shutil.copytree(sample.pristine, sample.home)
    return sample


def test_a_lost_catalog_is_refused_everywhere_and_never_recreated(home, tmp_path):
    shutil.move(home.home / "catalog.db", tmp_path / "catalog.db")
    for command in (("status",), QUERY, BACKFILL, ("verify",), ("controls", "--asset", "fact_sales"), ("backup",)):
        code, out, err = run(home.home, home.landing, *command)
        line = one_line(err)
        assert code == 1 and out == "", command
        assert f"the Iceberg catalog {home.home / 'catalog.db'} is missing" in line, line
        assert "atlasmart restore BACKUP" in line
    assert not (home.home / "catalog.db").exists()  # nothing re-created it
    with pytest.raises(StoreMissing, match="catalog.db is missing"):
        Platform.open(home.home, home.landing).warehouse


def test_a_lost_ledger_is_refused_and_never_recreated(home):
    for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm"):
        (home.home / name).unlink(missing_ok=True)
    for command in (("status",), ("verify",), QUERY, BACKFILL):
        code, _, err = run(home.home, home.landing, *command)
        line = one_line(err)
        assert code == 1 and f"the ledger {home.home / 'ledger.db'} is missing" in line, line
        assert "holds 10 tables" in line and "atlasmart restore BACKUP" in line
    assert not (home.home / "ledger.db").exists()
    with pytest.raises(StoreMissing):
        Platform.open(home.home, home.landing).ledger


def test_another_homes_catalog_is_refused(home, tmp_path):
    other = Platform.open(tmp_path / "other")
    other.ledger.partitions.events()  # its first use: the other home's stores, with its own id
    shutil.copyfile(tmp_path / "other" / "catalog.db", home.home / "catalog.db")
    code, _, err = run(home.home, home.landing, "status")
    line = one_line(err)
    assert code == 1 and "belong to different homes" in line and other.identity.home_id in line
    with pytest.raises(StoreForeign):
        Platform.open(home.home, home.landing).ledger


def test_a_home_moved_to_another_path_is_refused_not_read_from_the_old_one(home, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(home.home, moved)
    code, _, err = run(moved, home.landing, *QUERY)
    line = one_line(err)
    assert code == 1 and "names table files outside this home's warehouse" in line and str(home.home) in line
    assert f"the home was copied or moved here from {home.home}" in line and "run `atlasmart relocate`" in line


@pytest.mark.parametrize("lost, says", [("raw", "the raw store"), ("warehouse", "the table files of this home are")])
def test_a_lost_raw_store_or_table_folder_is_refused(home, lost, says):
    shutil.rmtree(home.home / lost)
    code, _, err = run(home.home, home.landing, "status")
    line = one_line(err)
    assert code == 1 and says in line and "missing" in line and "atlasmart restore BACKUP" in line


def test_backup_then_a_lost_catalog_then_restore_brings_everything_back(home, tmp_path):
    code, out, err = run(home.home, home.landing, "--json", "backup", "--to", str(tmp_path / "backups"))
    assert code == 0, err
    backup = json.loads(out)["path"]
    before_ids = ids(home.home)
    (home.home / "catalog.db").unlink()
    assert run(home.home, home.landing, "status")[0] == 1

    code, out, err = run(home.home, home.landing, "--json", "restore", backup)
    assert code == 0, err
    report = json.loads(out)
    assert report["verify"]["ok"] and report["home_id"] == before_ids[0][0]
    assert ids(home.home) == before_ids  # the restored ledger and catalog record one and the same id
    code, out, _ = run(home.home, home.landing, "--json", "status")
    assert code == 0 and {p["state"] for p in json.loads(out)} == {"CERTIFIED"}
    code, out, _ = run(home.home, home.landing, "--json", *QUERY)
    assert code == 0 and json.loads(out) == [{"n": 5}]


def test_a_fresh_home_gets_one_id_in_both_stores_on_first_use(tmp_path, embedded):
    fresh = tmp_path / "fresh"
    # Four first uses at once, as four commands started together would make them.
    start, errors, found = threading.Barrier(4), [], []

    def first_use() -> None:
        start.wait()
        try:
            platform = Platform.open(fresh)
            platform.ledger.partitions.events()
            found.append(platform.identity.home_id)
        except Exception as exc:  # collected: an exception in a thread would not fail the test
            errors.append(exc)

    threads = [threading.Thread(target=first_use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    ledger, catalog = ids(fresh)
    assert len(set(found)) == 1 and ledger == catalog == found[:1]
    assert run(fresh, tmp_path / "no-landing", "status")[0] == 0


def test_a_home_from_before_identities_is_adopted_once_its_stores_agree(home, tmp_path):
    def forget_ids() -> None:
        with sqlite3.connect(home.home / "ledger.db") as con:
            con.execute("DROP TABLE home_identity")  # as an AtlasMart that never wrote one left it
        with sqlite3.connect(home.home / "catalog.db") as con:
            con.execute("DELETE FROM iceberg_namespace_properties WHERE property_key = ?", (HOME_ID_PROPERTY,))

    forget_ids()
    code, out, err = run(home.home, home.landing, "--json", "status")
    assert code == 0 and {p["state"] for p in json.loads(out)} == {"CERTIFIED"}, err
    with sqlite3.connect(home.home / "ledger.db") as con:
        assert [r[0] for r in con.execute("SELECT origin FROM home_identity")] == ["adopted"]
    ledger, catalog = ids(home.home)
    assert len(ledger) == 1 and ledger == catalog

    forget_ids()
    shutil.move(home.home / "catalog.db", tmp_path / "catalog.db")  # an old home that lost its catalog
    code, _, err = run(home.home, home.landing, "status")
    assert code == 1 and "catalog.db is missing, but the ledger" in one_line(err)
    assert not (home.home / "catalog.db").exists()


def test_a_certified_version_the_table_no_longer_has_is_refused_not_read_as_empty(home):
    platform = Platform.open(home.home, home.landing)
    served = platform.ledger.partitions.served_map(MART_FINANCE_DAILY_SALES.name)
    first = served[min(served)].certification.snapshot_id
    table = platform.warehouse.table(MART_FINANCE_DAILY_SALES)
    with table.manage_snapshots() as refs:  # the certified-version tag protects it: removed as well
        for name, ref in table.metadata.refs.items():
            if ref.snapshot_id == first and name != "main":
                refs.remove_tag(name)
    table.maintenance.expire_snapshots().by_id(first).commit()  # behind maintenance's back
    with pytest.raises(SnapshotMissing, match=f"version {first}"):
        read_certified(platform, MART_FINANCE_DAILY_SALES.name)
    code, out, err = run(home.home, home.landing, *QUERY)
    assert code == 1 and '"n"' not in out and "could not be read" in one_line(err)


@pytest.fixture
def team_home(tmp_path, monkeypatch):
    """The sample loaded with ``atlasmart demo`` in a team deployment: (home, landing, database url, shared folder)."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with scratch_database() as url:
        shared = tmp_path / "shared"
        monkeypatch.setenv("ATLASMART_DATABASE_URL", url)
        monkeypatch.setenv("ATLASMART_WAREHOUSE", str(shared))
        env = Env(tmp_path / "team")
        code, _, err = run(env.home, env.landing, "demo")
        assert code == 0, err
        env.platform.ledger.close()
        yield SimpleNamespace(home=env.home, landing=env.landing, url=url, shared=shared)


def _holds_anything(url: str) -> bool:
    con = psycopg2.connect(url)
    try:
        with con.cursor() as cur:
            cur.execute("SELECT to_regnamespace(%s) IS NOT NULL OR to_regclass('iceberg_tables') IS NOT NULL",
                        (SCHEMA,))
            return cur.fetchone()[0]
    finally:
        con.close()


def test_team_a_dropped_or_replaced_database_is_refused_and_nothing_is_created(team_home, monkeypatch, tmp_path):
    assert run(team_home.home, team_home.landing, "status")[0] == 0
    with scratch_database() as empty:  # a new empty database in its place (a wrong URL, or re-created)
        monkeypatch.setenv("ATLASMART_DATABASE_URL", empty)
        code, _, err = run(team_home.home, team_home.landing, *QUERY)
        line = one_line(err)
        assert code == 1 and "the ledger in the team database" in line and "is missing" in line
        assert "holds 0 tables" not in line and "pg_restore" in line
        assert not _holds_anything(empty)  # the refusal created no ledger and no catalog in it

        # Another deployment's database (used once, on its own shared folder) pointed at this shared folder.
        monkeypatch.setenv("ATLASMART_WAREHOUSE", str(tmp_path / "other-shared"))
        assert run(team_home.home, team_home.landing, "status")[0] == 0
        monkeypatch.setenv("ATLASMART_WAREHOUSE", str(team_home.shared))
        code, _, err = run(team_home.home, team_home.landing, "status")
        assert code == 1 and "holds no tables, but" in one_line(err) and str(team_home.shared) in err

    monkeypatch.setenv("ATLASMART_DATABASE_URL", team_home.url)
    con = psycopg2.connect(team_home.url.rsplit("/", 1)[0] + "/postgres")
    con.autocommit = True
    with con.cursor() as cur:
        cur.execute(f'DROP DATABASE "{team_home.url.rsplit("/", 1)[1]}" WITH (FORCE)')
    con.close()
    code, _, err = run(team_home.home, team_home.landing, "status")
    line = one_line(err)
    assert code == 1 and "does not exist" in line and "never by creating an empty one" in line
