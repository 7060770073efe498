"""Two first opens of a fresh Dagster folder at once never leave it with two schema versions (issue 36).

Dagster creates and stamps each SQLite database of its storage on first open,
with no lock across processes: two first runs at once left two rows in
``alembic_version`` of ``runs.db`` and every later open failed with "more than
one head present". ``atlasmart dagster-home`` now creates the storage before it
returns, the pooled storage creates databases under a lock, and a doubled
version left by an earlier race is repaired (one migration line) or refused
with the commands that fix it.
"""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
import traceback
from pathlib import Path

import dagster as dg
import pytest

from atlasmart_dagster.errors import StoreUnreadable
from atlasmart_dagster.store.instance.dagster_instance import prepare_dagster_home
from atlasmart_dagster.store.home import AtlasmartHome

DATABASES = ("history/runs.db", "history/runs/index.db", "schedules/schedules.db")
# The revision Dagster stamps on SQLite tables it finds without a version: an ancestor of the head, and
# what the losing process of the race wrote next to the winner's head.
ANCESTOR = "5771160a95ad"


@pytest.fixture(autouse=True)
def _own_instance(monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # as atlasmart's own commands open the folder


def _versions(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [row[0] for row in con.execute("SELECT version_num FROM alembic_version")]
    finally:
        con.close()


def _head(folder: Path) -> str:
    instance = dg.DagsterInstance.from_config(str(folder))
    try:
        return instance.run_storage.alembic_version()[1]
    finally:
        instance.dispose()


def _a_run_works(folder: Path) -> int:
    """Open the instance at ``folder``, store a run and read it back; the number of runs stored."""
    instance = dg.DagsterInstance.from_config(str(folder))
    try:
        run = instance.add_run(dg.DagsterRun(job_name="schema_version_probe"))
        assert instance.get_run_by_id(run.run_id) is not None
        return instance.get_runs_count()
    finally:
        instance.dispose()


def _fresh_folder(tmp_path: Path) -> Path:
    folder = prepare_dagster_home(AtlasmartHome(tmp_path / "home"))
    _a_run_works(folder)  # the storage exists, whatever prepare_dagster_home did
    return folder


def test_dagster_home_creates_the_whole_storage_at_the_head_before_it_returns(tmp_path):
    folder = prepare_dagster_home(AtlasmartHome(tmp_path / "home"))
    versions = {name: _versions(folder / name) for name in DATABASES if (folder / name).exists()}
    assert set(versions) == set(DATABASES), "a database left for the first run to create (and race)"
    head = _head(folder)
    assert versions == {name: [head] for name in DATABASES}


def test_a_doubled_version_on_one_migration_line_is_repaired_once(tmp_path, capsys):
    folder = _fresh_folder(tmp_path)
    runs_db = folder / "history" / "runs.db"
    head = _versions(runs_db)[0]
    con = sqlite3.connect(runs_db)
    with con:
        con.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (ANCESTOR,))
    con.close()
    capsys.readouterr()

    assert _a_run_works(folder) == 2
    said = capsys.readouterr().err
    assert said.count("repaired") == 1 and str(runs_db) in said and f"kept the newest, {head}" in said
    assert _versions(runs_db) == [head]
    assert _a_run_works(folder) == 3
    assert "repaired" not in capsys.readouterr().err  # said once


def test_a_doubled_version_on_two_lines_is_refused_with_the_fix(tmp_path):
    folder = _fresh_folder(tmp_path)
    runs_db = folder / "history" / "runs.db"
    con = sqlite3.connect(runs_db)
    with con:
        con.execute("INSERT INTO alembic_version (version_num) VALUES ('0badc0ffee00')")  # not on Dagster's line
    con.close()

    with pytest.raises(StoreUnreadable) as refused:
        _a_run_works(folder)
    message = str(refused.value)
    assert "\n" not in message and str(runs_db) in message
    assert f"sqlite3 '{runs_db}' 'DELETE FROM alembic_version'" in message
    assert f"DAGSTER_HOME='{folder}' dagster instance migrate" in message
    assert len(_versions(runs_db)) == 2  # refused, not guessed

    # The fix it names works: Dagster stamps the version-less tables and migrates them to the head.
    con = sqlite3.connect(runs_db)
    with con:
        con.execute("DELETE FROM alembic_version")
    con.close()
    instance = dg.DagsterInstance.from_config(str(folder))
    try:
        instance.upgrade()
    finally:
        instance.dispose()
    assert _a_run_works(folder) == 2
    assert _versions(runs_db) == [_head(folder)]


def _open_and_store_a_run(folder: str, start, errors) -> None:
    try:
        start.wait(60)
        instance = dg.DagsterInstance.from_config(folder)
        try:
            instance.add_run(dg.DagsterRun(job_name="first_run"))
        finally:
            instance.dispose()
    except BaseException:
        errors.put(traceback.format_exc())
        raise


def test_first_opens_at_once_leave_one_version_per_database(tmp_path):
    """Processes that open a folder holding only dagster.yaml at the same moment (the folder as
    `atlasmart dagster-home` used to leave it) each store a run; every database has one version."""
    ctx = multiprocessing.get_context("fork")  # started at once: no import time between them
    processes_per_round = 4
    for attempt in range(3):  # the race was lost about half the time: three rounds make a pass meaningful
        folder = prepare_dagster_home(AtlasmartHome(tmp_path / f"home{attempt}"))
        for name in ("history", "schedules"):
            shutil.rmtree(folder / name, ignore_errors=True)
        start, errors = ctx.Event(), ctx.Queue()
        workers = [ctx.Process(target=_open_and_store_a_run, args=(str(folder), start, errors))
                   for _ in range(processes_per_round)]
        for worker in workers:
            worker.start()
        start.set()
        for worker in workers:
            worker.join(120)
        failures = []
        while not errors.empty():
            failures.append(errors.get())
        assert [worker.exitcode for worker in workers] == [0] * processes_per_round, failures[:1]
        for name in DATABASES:
            assert len(_versions(folder / name)) == 1, name
        head = _head(folder)
        assert {name: _versions(folder / name) for name in DATABASES} == {name: [head] for name in DATABASES}
        assert _a_run_works(folder) == processes_per_round + 1
