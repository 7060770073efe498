"""Shared fixtures: a scratch home per test, the sample landing zone copied so tests may change it."""

from __future__ import annotations

import os
import tempfile

import pytest

from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.s3_server import STARTED_MARK_ENV, stop_server_started_by_workers
from atlasmart_dagster_tests.team_database import team_deployment  # noqa: F401 - a fixture for every test


def pytest_configure(config):
    """In the controlling process of a parallel (pytest-xdist) run, before its workers start: name the
    file a worker leaves when it starts the S3 server, so this process stops the server at the end."""
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        os.environ[STARTED_MARK_ENV] = os.path.join(tempfile.mkdtemp(prefix="atlasmart-s3-"), "started")


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        stop_server_started_by_workers()


@pytest.fixture
def deployment() -> str:
    """The deployment a test's home uses. Modules covering both import the parametrized one
    from ``atlasmart_dagster_tests.team_database``, which overrides this."""
    return "embedded"


@pytest.fixture
def env(tmp_path, deployment) -> Env:
    return Env(tmp_path)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> Env:
    """The whole sample loaded in one backfill-lane range run and certified (read-only for tests)."""
    from atlasmart_dagster.ops.runs import run_chain, run_reference

    env = Env(tmp_path_factory.mktemp("loaded"))
    assert run_reference(env.defs, env.instance)
    outcome = run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill")
    assert outcome.success, outcome.failures
    env.outcome = outcome
    return env
