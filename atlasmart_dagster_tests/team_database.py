"""Throwaway Postgres databases for the team-mode tests (created per test, dropped after), and a team instance.

The team deployment's tests run against the real PostgreSQL on 127.0.0.1:5432
(``ATLASMART_TEST_POSTGRES`` overrides the server URL). Without one they skip
with a line saying how to run them, except under ``CI=true``, where a missing
server fails the run: CI can never pass by skipping them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import dagster as dg
import pytest

from atlasmart_dagster.store.instance.dagster_instance import packaged_instance_config
from atlasmart_dagster.store.home import sample_dir

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

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


@pytest.fixture(params=["embedded", "team", "team-s3"])
def deployment(request) -> str:
    """Run the importing module's tests in every deployment: embedded, team on a shared folder, team on S3.

    A module opts in with ``from atlasmart_dagster_tests.team_database import deployment``; its
    ``env`` fixtures (which depend on ``deployment``) then open their homes in that mode. The team
    ones use a scratch database; ``team-s3`` keeps table files and raw batches under a fresh prefix
    of the real S3 server (``s3_server.py``: skipped without one, failed under ``CI=true``). The
    value is the kind, ``embedded`` or ``team``: what a test may do differs by kind, not by where
    a team keeps its files.
    """
    if request.param == "team":
        request.getfixturevalue("team_deployment")
    elif request.param == "team-s3":
        from atlasmart_dagster_tests.s3_server import s3_team_environment  # it imports this module

        environment = s3_team_environment(request.getfixturevalue("monkeypatch"))
        environment.__enter__()
        request.addfinalizer(lambda: environment.__exit__(None, None, None))
    return "embedded" if request.param == "embedded" else "team"


@dataclass
class TeamDaemon:
    """A team deployment served by real ``dagster-daemon`` processes, as the tests' shell commands see it."""

    shell: dict[str, str]  # the environment an operator's shell would have
    instance: dg.DagsterInstance  # the team's Dagster instance on Postgres, opened by the test
    root: Path
    daemons: list[subprocess.Popen] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)  # each daemon's output, in the order they started

    def start_daemon(self) -> subprocess.Popen:
        """Start ``dagster-daemon run`` and return once its run queue and backfill daemons both beat."""
        self.logs.append(self.root / f"daemon-{len(self.daemons)}.log")
        daemon = subprocess.Popen([BIN / "dagster-daemon", "run", "-w", str(REPO / "workspace.yaml")],
                                  env=self.shell, cwd=REPO, stdout=open(self.logs[-1], "w"),
                                  stderr=subprocess.STDOUT, start_new_session=True)
        self.daemons.append(daemon)
        since = time.time()
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            beats = self.instance.get_daemon_heartbeats()
            if all(d in beats and beats[d].timestamp > since for d in ("QUEUED_RUN_COORDINATOR", "BACKFILL")):
                return daemon
            assert daemon.poll() is None, self.logs[-1].read_text()[-3000:]
            time.sleep(1)
        raise AssertionError("dagster-daemon did not start beating within 180 s")


@pytest.fixture
def team_daemon(tmp_path, monkeypatch) -> Iterator[TeamDaemon]:
    """A Postgres team instance (scratch database, the packaged team dagster.yaml), no daemon started yet.

    Every daemon the test starts ends with its process group (its code servers
    and the runs they started) when the test ends.
    """
    with scratch_database() as url:
        dagster_home = tmp_path / "dagster"
        dagster_home.mkdir()
        (dagster_home / "dagster.yaml").write_text(packaged_instance_config(team=True).read_text())
        shell = {
            **os.environ,
            "ATLASMART_HOME": str(tmp_path / "home"),
            "ATLASMART_LANDING": str(sample_dir() / "landing"),
            "ATLASMART_DATABASE_URL": url,
            "ATLASMART_WAREHOUSE": str(tmp_path / "shared"),
            "DAGSTER_HOME": str(dagster_home),
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",
        }
        monkeypatch.setenv("ATLASMART_DATABASE_URL", url)  # the instance's dagster.yaml reads it
        team = TeamDaemon(shell, dg.DagsterInstance.from_config(str(dagster_home)), tmp_path)
        try:
            yield team
        finally:
            for daemon in team.daemons:
                try:
                    os.killpg(daemon.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                daemon.wait(timeout=60)
            team.instance.dispose()
