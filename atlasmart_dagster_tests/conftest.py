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


def pytest_collection_modifyitems(config, items):
    """Run the ``[team-s3]`` case of a deployment-parametrized test only where the test is marked ``on_s3``.

    The team cases on S3 cost 4-5x the shared-folder ones (a demo took 130 s against 25 s on 2 cores: each table
    and raw-store operation is a round trip to the gateway) and were a quarter of the default suite. Where the
    files live matters to reading older certified versions, withdrawal, verify and the raw store, so those tests
    keep their S3 case; for the rest, ``[team]`` covers the team logic and ``e2e/test_team_s3.py`` the object
    store itself. The cases left out are reported as deselected, never skipped."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_s3 = callspec is not None and callspec.params.get("deployment") == "team-s3"
        (dropped if on_s3 and item.get_closest_marker("on_s3") is None else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


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
    from atlasmart_dagster.ops.runs.chains import run_chain, run_reference

    env = Env(tmp_path_factory.mktemp("loaded"))
    assert run_reference(env.defs, env.instance)
    outcome = run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill")
    assert outcome.success, outcome.failures
    env.outcome = outcome
    return env
