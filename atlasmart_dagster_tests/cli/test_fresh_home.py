"""The first uses of a fresh home at once create one sound Dagster instance, not a corrupted one."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from atlasmart_dagster.store.instance.dagster_instance import dagster_instance
from atlasmart_dagster.store.home import AtlasmartHome


@pytest.mark.parametrize("dagster_home_from_env", [False, True], ids=["home/dagster", "DAGSTER_HOME"])
def test_first_commands_at_once_initialise_the_instance_storage_once(tmp_path, monkeypatch, dagster_home_from_env):
    home = AtlasmartHome(tmp_path / "home").ensure()
    folder = tmp_path / "operator-dagster" if dagster_home_from_env else home.dagster_home
    if dagster_home_from_env:
        monkeypatch.setenv("DAGSTER_HOME", str(folder))
    else:
        monkeypatch.delenv("DAGSTER_HOME", raising=False)
    # Four first uses at once, as four commands started together would do
    # (without the init lock this failed or doubled alembic_version every time).
    start, errors = threading.Barrier(4), []

    def first_use() -> None:
        start.wait()
        try:
            dagster_instance(home)
        except Exception as exc:  # collected: an exception in a thread would not fail the test
            errors.append(exc)

    threads = [threading.Thread(target=first_use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with sqlite3.connect(folder / "history" / "runs.db") as con:
        assert con.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)
    instance = dagster_instance(home)
    assert instance.root_directory == str(folder) and instance.get_runs() == []
    assert "atlasmart/lane" in (folder / "dagster.yaml").read_text()
