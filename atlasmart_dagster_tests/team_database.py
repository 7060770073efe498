"""Throwaway Postgres databases for the team-mode tests (created per test, dropped after).

The team deployment's tests run against the real PostgreSQL on 127.0.0.1:5432
(``ATLASMART_TEST_POSTGRES`` overrides the server URL). Without one they skip
with a line saying how to run them, except under ``CI=true``, where a missing
server fails the run: CI can never pass by skipping them.
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from typing import Iterator

import pytest

SERVER_URL = os.environ.get("ATLASMART_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def _admin():
    import psycopg2

    con = psycopg2.connect(SERVER_URL, connect_timeout=5)
    con.autocommit = True
    return con


def require_postgres() -> None:
    """Skip (or, under CI, fail) when the test server is not reachable."""
    try:
        _admin().close()
    except Exception as exc:  # noqa: BLE001 - any reason to be unreachable is the same answer
        message = (
            f"PostgreSQL at {SERVER_URL} is not reachable ({str(exc).strip().splitlines()[0]}); "
            "start it (pg_ctlcluster 15 main start) or set ATLASMART_TEST_POSTGRES to run the team-mode tests"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@contextmanager
def scratch_database(prefix: str = "atlasmart_t") -> Iterator[str]:
    """A new empty database; yields its URL and drops it (and its sessions) afterwards."""
    require_postgres()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    con = _admin()
    with con.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    base = SERVER_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with con.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        con.close()


@pytest.fixture
def team_deployment(tmp_path, monkeypatch) -> Iterator[str]:
    """Switch this test to the team deployment: a scratch database and a shared folder."""
    with scratch_database() as url:
        shared = tmp_path / "shared"
        shared.mkdir()
        monkeypatch.setenv("ATLASMART_DATABASE_URL", url)
        monkeypatch.setenv("ATLASMART_WAREHOUSE", str(shared))
        yield url


@pytest.fixture(params=["embedded", "team"])
def deployment(request) -> str:
    """Run the importing module's tests in both deployments (the team one on a scratch database).

    A module opts in with ``from atlasmart_dagster_tests.team_database import deployment``; its
    ``env`` fixtures (which depend on ``deployment``) then open their homes in that mode.
    """
    if request.param == "team":
        request.getfixturevalue("team_deployment")
    return request.param
