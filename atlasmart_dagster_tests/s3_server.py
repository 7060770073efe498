"""The real S3 server of the object-store tests (Ceph RGW started by ``s3-local.sh``), and a team deployment on it.

The tests find the server through the exports the script writes
(``$S3_DIR/env``, default ``/tmp/s3-local/env``), or through
``AWS_ENDPOINT_URL`` and the AWS credential variables already set. When none
answers, the first test that needs one starts it with the script
(``$ATLASMART_TEST_S3_LOCAL``, default ``../shared/tools/s3-local.sh`` beside the
checkout: ~15 s, and a minute of Debian packages the first time) and the
test run stops it when it ends; a server that was already running is
left running. Where it cannot be started they skip with a line saying how
to start one, except under ``CI=true``, where a missing server fails the run
(as a missing Postgres does, ``team_database.py``): CI can never pass by
skipping them.

Each test gets its own key prefix in the bucket, removed afterwards, and
its own scratch database.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import subprocess
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.request import urlopen

import pytest

from atlasmart_dagster_tests.team_database import scratch_database

REPO = Path(__file__).resolve().parents[1]
S3_LOCAL = os.environ.get("ATLASMART_TEST_S3_LOCAL", str(REPO.parent / "shared" / "tools" / "s3-local.sh"))
ENV_FILE = Path(os.environ.get("S3_DIR", "/tmp/s3-local")) / "env"
_SETTINGS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "S3_TEST_BUCKET")


def server_settings() -> dict[str, str]:
    """The server's endpoint, test credentials and bucket: from the environment, else the script's env file."""
    found = {k: os.environ[k] for k in _SETTINGS if os.environ.get(k)}
    if "AWS_ENDPOINT_URL" not in found and ENV_FILE.is_file():
        for line in ENV_FILE.read_text().splitlines():
            name, _, value = line.removeprefix("export ").partition("=")
            if name in _SETTINGS:
                found.setdefault(name, value.strip())
    found.setdefault("S3_TEST_BUCKET", "warehouse")
    found.setdefault("AWS_REGION", "us-east-1")
    return found


_START_ATTEMPT: list[str | None] = []  # the one start of this test process: None, or why it failed
# Under pytest-xdist the workers share one server: the first to need it starts it under a lock (the
# others wait, then find it up), and the controlling process stops it when the whole run ends
# (``stop_server_started_by_workers``, called from conftest), never a worker that finishes early.
STARTED_MARK_ENV = "ATLASMART_TEST_S3_STARTED_MARK"


def _start_server() -> str | None:
    """Start the server with the script, once per test run, stopped at its end; None, or why not."""
    if not _START_ATTEMPT:
        if not Path(S3_LOCAL).is_file():
            _START_ATTEMPT.append(f"{S3_LOCAL} does not exist (set ATLASMART_TEST_S3_LOCAL)")
        else:
            ENV_FILE.parent.mkdir(parents=True, exist_ok=True)
            with open(ENV_FILE.parent / "tests-start.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be starting it right now
                if _unreachable(server_settings()) is None:
                    _START_ATTEMPT.append(None)  # started by a sibling worker: theirs to stop
                    return None
                started = subprocess.run(["bash", S3_LOCAL, "start"], capture_output=True, text=True, timeout=900)
            if started.returncode:
                last = (started.stderr.strip().splitlines() or ["no output"])[-1]
                _START_ATTEMPT.append(f"bash {S3_LOCAL} start failed ({last})")
            else:
                mark = os.environ.get(STARTED_MARK_ENV)
                if mark:
                    Path(mark).touch()
                else:
                    atexit.register(subprocess.run, ["bash", S3_LOCAL, "stop"], capture_output=True, timeout=120)
                _START_ATTEMPT.append(None)
    return _START_ATTEMPT[0]


def stop_server_started_by_workers() -> None:
    """In the controlling process of a parallel run: stop the server if one of its workers started it."""
    mark = os.environ.get(STARTED_MARK_ENV)
    if mark and Path(mark).exists():
        subprocess.run(["bash", S3_LOCAL, "stop"], capture_output=True, timeout=120)
        Path(mark).unlink()


def _unreachable(settings: dict[str, str]) -> str | None:
    endpoint = settings.get("AWS_ENDPOINT_URL")
    if not endpoint or "AWS_ACCESS_KEY_ID" not in settings:
        return f"no S3 server is configured (no AWS_ENDPOINT_URL, no {ENV_FILE})"
    try:
        urlopen(endpoint, timeout=5).close()
    except Exception as exc:  # noqa: BLE001 - any reason to be unreachable is the same answer
        return f"the S3 server at {endpoint} is not reachable ({exc})"
    return None


def require_s3() -> dict[str, str]:
    """The server's settings, starting it if none answers; skip (or, under CI, fail) when it cannot be had."""
    settings = server_settings()
    problem = _unreachable(settings)
    if problem and "AWS_ENDPOINT_URL" not in os.environ:  # an endpoint set by hand is not ours to start
        failed = _start_server()
        settings = server_settings()
        problem = f"{problem}; {failed}" if failed else _unreachable(settings)
    if problem:
        message = f"{problem}; start it (bash {S3_LOCAL} start) to run the object-store tests"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return settings


@contextmanager
def s3_prefix(settings: dict[str, str]) -> Iterator[str]:
    """A fresh ``s3://bucket/<random>`` prefix, emptied afterwards."""
    from urllib.parse import urlsplit

    from pyarrow.fs import S3FileSystem

    key = f"{settings['S3_TEST_BUCKET']}/t-{uuid.uuid4().hex[:12]}"
    try:
        yield f"s3://{key}"
    finally:
        # The test's own credentials: the test process may have given them only to the processes it started.
        endpoint = urlsplit(settings["AWS_ENDPOINT_URL"])
        S3FileSystem(access_key=settings["AWS_ACCESS_KEY_ID"], secret_key=settings["AWS_SECRET_ACCESS_KEY"],
                     endpoint_override=endpoint.netloc, scheme=endpoint.scheme, region=settings["AWS_REGION"],
                     ).delete_dir_contents(key, missing_dir_ok=True)


@contextmanager
def s3_team_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The team deployment on the S3 server: a scratch database, a fresh bucket prefix; yields the prefix URL."""
    settings = require_s3()
    with scratch_database() as url, s3_prefix(settings) as prefix:
        monkeypatch.setenv("ATLASMART_DATABASE_URL", url)
        monkeypatch.setenv("ATLASMART_WAREHOUSE", prefix)
        monkeypatch.setenv("ATLASMART_S3_ENDPOINT", settings["AWS_ENDPOINT_URL"])
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
            monkeypatch.setenv(name, settings[name])
        yield prefix


@pytest.fixture
def s3_team_deployment(monkeypatch) -> Iterator[str]:
    """Switch this test to the team deployment on the S3 server; yields the warehouse's ``s3://`` prefix."""
    with s3_team_environment(monkeypatch) as prefix:
        yield prefix


@contextmanager
def team_warehouse(kind: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a team deployment's data place, for processes a test starts: ``team`` or ``team-s3``.

    ``team``: a shared folder in ``tmp_path``; ``team-s3``: a fresh prefix on
    the S3 server, with its endpoint and the test credentials.
    """
    if kind == "team":
        yield {"ATLASMART_WAREHOUSE": str(tmp_path / "shared")}
        return
    settings = require_s3()
    with s3_prefix(settings) as prefix:
        yield {"ATLASMART_WAREHOUSE": prefix, "ATLASMART_S3_ENDPOINT": settings["AWS_ENDPOINT_URL"],
               **{name: settings[name] for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")}}
