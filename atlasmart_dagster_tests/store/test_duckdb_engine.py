"""The process's shared DuckDB engine is closed at exit: no "nanobind: leaked" block after a command or a test run."""

import subprocess
import sys
from pathlib import Path

import atlasmart_dagster

REPO = Path(atlasmart_dagster.__file__).parents[1]

# What a team-mode test process holds at exit: the root logger's filter from store/platform.py
# and a Dagster instance keep the warehouse module, and its engine, alive past DuckDB's own teardown.
HELD_AT_EXIT = """
import dagster
from atlasmart_dagster.store.platform import quiet_postgres_retries
from atlasmart_dagster.store.warehouse import duckdb_connection

quiet_postgres_retries()
instance = dagster.DagsterInstance.ephemeral()
assert duckdb_connection().sql("SELECT 1").fetchall() == [(1,)]
"""


def test_an_engine_still_referenced_at_exit_is_closed_before_duckdb_tears_down():
    done = subprocess.run([sys.executable, "-c", HELD_AT_EXIT], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "nanobind" not in done.stderr, done.stderr[-2000:]

