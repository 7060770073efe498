"""certification_sensor catches up on every run that ended while it was off, however it was launched."""

import dagster as dg
import pytest

from atlasmart_dagster.defs.assets.served import served_asset
from atlasmart_dagster.defs.automation.certification_sensor import certification_sensor, certification_tick
from atlasmart_dagster.defs.checks.certification_checks import CERTIFICATION_STATE
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster.store.ledger.partition_states import CERTIFICATION_REFUSED, CERTIFIED
from atlasmart_dagster.store.tables import CERTIFIED_ASSETS
from atlasmart_dagster_tests.environment import Env

MART = "mart_finance_daily_sales"


@pytest.fixture
def env(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T08:10:00Z")
    return env


def job_page_run(env, day: str, **kwargs) -> dg.ExecuteInProcessResult:
    """A run as the job page makes it: the job, one partition, no AtlasMart command around it."""
    return env.defs.resolve_job_def("daily_sales_job").execute_in_process(
        instance=env.instance, partition_key=day, raise_on_error=False, **kwargs)


def tick(env, cursor=None):
    context = dg.build_sensor_context(instance=env.instance, resources={"atlasmart": env.resource}, cursor=cursor)
    result = certification_sensor(context)
    return result, context.cursor


def state_rows(env) -> list[dg.AssetCheckEvaluation]:
    """The served asset's headline evaluations, newest first."""
    key = dg.AssetCheckKey(dg.AssetKey(served_asset(MART)), CERTIFICATION_STATE)
    return [r.event.dagster_event.event_specific_data
            for r in env.instance.event_log_storage.get_asset_check_execution_history(key, limit=100) if r.event]


def test_runs_that_ended_while_the_sensor_was_off_are_certified_on_its_first_tick(env):
    first, second = job_page_run(env, "2026-09-20"), job_page_run(env, "2026-09-21")
    assert first.success and second.success
    assert not env.ledger.partitions.served(MART, "2026-09-20")  # nothing certifies inside a run

    result, cursor = tick(env)
    for day in ("2026-09-20", "2026-09-21"):
        assert all(env.ledger.partitions.served(a, day) for a in CERTIFIED_ASSETS), day
    # the UI's headline says so, in one row for the tick's decisions
    newest = state_rows(env)[0]
    assert newest.metadata["changed"].value == "2026-09-20...2026-09-21"
    assert "This evaluation: 2026-09-20...2026-09-21 CERTIFIED v1" in newest.description
    # each certifying run asks for the dashboards' golden checks
    assert {r.run_key for r in result.run_requests} == {f"golden-{first.run_id}", f"golden-{second.run_id}"}

    decided = len(env.ledger.partitions.events(states=(CERTIFIED, CERTIFICATION_REFUSED)))
    again, _ = tick(env, cursor)
    assert isinstance(again, dg.SkipReason)  # idempotent: nothing is decided twice
    assert len(env.ledger.partitions.events(states=(CERTIFIED, CERTIFICATION_REFUSED))) == decided


def test_a_failed_run_is_refused_and_its_day_gets_a_state_row(env):
    for f in env.day_dir("2026-09-21").iterdir():
        if f.name != "_manifest.json":
            f.write_bytes(f.read_bytes() + b"{broken\n")  # the manifest's hash no longer matches
    failed = job_page_run(env, "2026-09-21")
    assert not failed.success
    tick(env)
    row = state_rows(env)[0]
    assert not row.passed and row.metadata["changed"].value == "2026-09-21"
    assert "- 2026-09-21 DELAYED: blocked upstream" in row.description, row.description  # with why: the manifest's hash


def test_builds_of_runs_this_instance_never_had_are_left_to_their_own_command(env):
    # built by a run of another instance (a command with its own): this instance never had the run
    run_chain(env.defs, dg.DagsterInstance.ephemeral(), env.platform, ["2026-09-19"], lane="backfill",
              certify=False)
    decisions, _, _, certifying = certification_tick(env.instance, env.platform, None, actor="test")
    assert decisions == [] and certifying == []
    assert not env.ledger.partitions.served(MART, "2026-09-19")  # `atlasmart certify --run` decides it
