"""A team database URL without a host or a database is a usage error, and nothing is created anywhere (issue 36, 8)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from atlasmart_dagster_tests.team_database import SERVER_URL, require_postgres

ATLASMART = Path(sys.executable).parent / "atlasmart"
REPO = Path(__file__).resolve().parents[2]


def _ledger_schemas() -> dict[str, bool]:
    import psycopg2

    found = {}
    base = SERVER_URL.rsplit("/", 1)[0]
    for name in ("root", "postgres"):
        try:
            con = psycopg2.connect(f"{base}/{name}", connect_timeout=5)
        except psycopg2.OperationalError:
            found[name] = False  # no such database: nothing in it either
            continue
        with con, con.cursor() as cur:
            cur.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = 'atlasmart_ledger'")
            found[name] = cur.fetchone() is not None
        con.close()
    return found


@pytest.mark.parametrize("url", ["postgresql://", "postgresql://postgres@127.0.0.1:5432", "postgresql:///postgres",
                                 "postgresql://postgres@127.0.0.1/"])
def test_a_database_url_without_host_or_database_is_a_usage_error(tmp_path, url):
    require_postgres()
    before = _ledger_schemas()
    env = {**os.environ, "ATLASMART_DATABASE_URL": url, "ATLASMART_WAREHOUSE": str(tmp_path / "shared"),
           "PYTHONPATH": str(REPO)}
    env.pop("DAGSTER_HOME", None)
    done = subprocess.run([str(ATLASMART), "--home", str(tmp_path / "home"), "status"], capture_output=True,
                          text=True, timeout=120, env=env)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "postgresql://USER@HOST[:PORT]/DATABASE" in lines[0]
    assert _ledger_schemas() == before
