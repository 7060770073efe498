"""The served_* assets: a day is materialized in Dagster exactly when consumers are served a certified version."""

import json

import dagster as dg
import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.defs.assets.served import SERVED_ASSETS, served_asset, sync_served_partitions
from atlasmart_dagster.defs.automation.certification_sensor import certification_tick
from atlasmart_dagster.defs.checks.certification_checks import CERTIFICATION_STATE, report_day_states
from atlasmart_dagster.defs.partitions import daily_partitions
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAYS = ["2026-09-19", "2026-09-20"]
MART = "mart_finance_daily_sales"
SERVED = served_asset(MART)


@pytest.fixture
def sqlite_env(tmp_path):
    """A scratch home with a real SQLite Dagster instance (the embedded default's storage)."""
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T08:10:00Z")
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        env.instance = instance
        yield env


def shown(env, asset: str = SERVED) -> set[str]:
    return env.instance.get_materialized_partitions(dg.AssetKey(asset))


def latest(env, day: str, asset: str = SERVED) -> dict:
    result = env.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[day]), limit=1)
    return {k: v.value for k, v in result.records[0].asset_materialization.metadata.items()}


def test_a_built_day_is_green_on_the_mart_and_missing_on_the_served_asset_until_certified(sqlite_env):
    env = sqlite_env
    outcome = run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill", certify=False)
    assert shown(env, MART) == set(DAYS)  # a build is a materialization of the mart ...
    assert shown(env) == set()  # ... but nothing is served yet

    decisions, _, touched, _ = certification_tick(env.instance, env.platform, None, actor="test")
    assert {d.partition for d in decisions if d.certified} == set(DAYS) and touched == DAYS
    for asset in SERVED_ASSETS:
        assert shown(env, asset) == set(DAYS), asset
    served = env.ledger.partitions.served(MART, DAYS[0])
    metadata = latest(env, DAYS[0])
    assert metadata["version"] == 1 and metadata["certified_by_run"] == outcome.run_id
    assert metadata["certified_at"] == served.certified_at and metadata["fingerprint"] == served.certification.fingerprint
    assert isinstance(metadata["snapshot_id"], str)  # an id, not a figure to plot


def newest_record(instance, day: str, asset: str = SERVED):
    return instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[day]), limit=1).records[0]


def test_a_served_day_is_recorded_in_the_run_that_built_it_so_its_header_names_a_run_not_none(sqlite_env):
    """The day's page shows the run and job of the newest materialization's run id in its header ("Run None" when
    it is empty); the metadata names the run too, as a run entry, which the UI links. What the UI's pages make of
    it, the checks included: defs/checks/test_served_checks_in_ui.py."""
    env = sqlite_env
    outcome = run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill")
    for asset in SERVED_ASSETS:
        for day in DAYS:
            record = newest_record(env.instance, day, asset)
            assert record.run_id == outcome.run_id  # the certification's run, as certified_by_run says
            entry = record.asset_materialization.metadata["certified_by_run"]
            assert isinstance(entry, dg.DagsterRunMetadataValue) and entry.run_id == outcome.run_id
    run = env.instance.get_run_by_id(outcome.run_id)
    assert (run.job_name, run.status) == ("backfill_sales_job", dg.DagsterRunStatus.SUCCESS)  # the header's Run, Job
    # the run's own log (where the header's link leads) says when each day of it was served, after the run ended
    logged = [e for e in env.instance.all_logs(outcome.run_id) if e.dagster_event is not None]
    served = [e for e in logged if e.dagster_event.asset_key in {dg.AssetKey(a) for a in SERVED_ASSETS}]
    assert sorted((e.dagster_event.asset_key.to_user_string(), e.dagster_event.partition) for e in served) == sorted(
        (a, d) for a in SERVED_ASSETS for d in DAYS)
    ended = next(e for e in logged if e.dagster_event.event_type == dg.DagsterEventType.RUN_SUCCESS)
    assert min(e.timestamp for e in served) >= ended.timestamp


def test_sync_is_idempotent_and_a_withdrawal_turns_the_day_missing(sqlite_env, capsys):
    env = sqlite_env
    run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill")
    assert shown(env) == set(DAYS)
    assert sync_served_partitions(env.instance, env.platform) == {}  # nothing changed: no new event

    code = main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical", "--json", "incident",
                 "report", "--actor", "analyst@atlasmart.example", "--partition", DAYS[1], "--text", "looks wrong"])
    incident = json.loads(capsys.readouterr().out)["incident"]
    assert code == 0
    # contain withdraws the day's certification (recorded in the ledger only, as a command run elsewhere would) ...
    assert main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical", "--ephemeral-instance",
                 "incident", "contain", incident, "--actor", "oncall@atlasmart.example"]) == 0
    assert env.ledger.partitions.served(MART, DAYS[1]) is None
    assert shown(env) == set(DAYS)  # ... the instance was not told yet
    changed = sync_served_partitions(env.instance, env.platform)
    # wiped whole (Dagster 1.13 cannot wipe one partition of a SQL event log), the served day shown again
    assert changed[SERVED] == [f"-{DAYS[1]}", f"+{DAYS[0]}"]
    assert shown(env) == {DAYS[0]}  # withdrawn: missing; the other day still served
    assert latest(env, DAYS[0])["version"] == 1


def test_a_withdrawal_keeps_every_days_certification_state_readable(sqlite_env, capsys):
    """Dagster's wipe of the served asset takes its check history along; the headline is shown again."""
    env = sqlite_env
    run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill")
    base = ["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical"]
    assert main([*base, "--json", "incident", "report", "--actor", "analyst@atlasmart.example", "--partition",
                 DAYS[1], "--text", "looks wrong"]) == 0
    incident = json.loads(capsys.readouterr().out)["incident"]
    assert main([*base, "--ephemeral-instance", "incident", "contain", incident, "--actor", "oncall@atlasmart.example"]) == 0
    report_day_states(env.instance, env.platform, None)  # what certification_sensor does when serving changed
    assert shown(env) == {DAYS[0]}
    key = dg.AssetCheckKey(dg.AssetKey(SERVED), CERTIFICATION_STATE)
    (row,) = [r.event.dagster_event.asset_check_evaluation_data
              for r in env.instance.event_log_storage.get_asset_check_execution_history(key, limit=100)]
    days = row.metadata["days"].value
    assert days[DAYS[0]]["state"] == "CERTIFIED" and days[DAYS[0]]["version"] == 1
    assert days[DAYS[1]]["state"] == "WITHDRAWN" and not days[DAYS[1]]["served"]
    assert not row.passed and f"- {DAYS[1]} WITHDRAWN: certification withdrawn; nothing is served" in row.description
    assert row.metadata["changed"].value == DAYS[1]  # the withdrawal's day, not every day shown again


def test_a_held_restatement_keeps_the_day_green_with_the_version_consumers_keep(sqlite_env):
    env = sqlite_env
    day = DAYS[0]
    run_chain(env.defs, env.instance, env.platform, [day], lane="backfill")
    rows = [{**r, "source_seq": r["source_seq"] + 100, "line_amount_usd": "200.00", "line_cost_usd": "120.00"}
            for r in read_rows(env.day_dir(day))]
    write_batch(env.day_dir(day), rows, batch_id="ERP-20260919-02", ready_at="2026-09-22T08:00:00Z")
    assert run_chain(env.defs, env.instance, env.platform, [day], lane="backfill").certified == []
    assert shown(env) == {day} and latest(env, day)["version"] == 1


def test_the_sensor_brings_a_migrated_or_restored_home_into_a_new_instance(sqlite_env, tmp_path):
    """Served state lives in the ledger; an instance that never saw the runs (a migration) shows it after one tick."""
    env = sqlite_env
    run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill")
    (tmp_path / "another").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "another")) as fresh:
        assert fresh.get_materialized_partitions(dg.AssetKey(SERVED)) == set()
        _, cursor, _, _ = certification_tick(fresh, env.platform, None, actor="test")
        assert fresh.get_materialized_partitions(dg.AssetKey(SERVED)) == set(DAYS)
        # its runs are not in this instance: the days are recorded runless (the header says Run None, truly)
        assert {newest_record(fresh, day).run_id for day in DAYS} == {""}
        # the next tick, with nothing changed, writes nothing
        before = len(fresh.fetch_materializations(dg.AssetKey(SERVED), limit=100).records)
        certification_tick(fresh, env.platform, cursor, actor="test")
        assert len(fresh.fetch_materializations(dg.AssetKey(SERVED), limit=100).records) == before


def test_a_refused_backfill_over_a_served_day_leaves_it_served(sqlite_env):
    """The finding: a backfill that touched the current day failed, the mart turned red, the day was still served."""
    env = sqlite_env
    current = "2026-09-21"
    run_chain(env.defs, env.instance, env.platform, [current], lane="current")
    refused = env.defs.resolve_job_def("backfill_sales_job").execute_in_process(
        instance=env.instance, partition_key=current, raise_on_error=False)  # the lane guard refuses it
    assert not refused.success
    certification_tick(env.instance, env.platform, None, actor="test")
    assert env.ledger.partitions.served(MART, current) is not None
    mart = env.instance.get_status_by_partition(dg.AssetKey(MART), [current], daily_partitions)
    assert mart[current].value == "FAILED"  # the product's own asset says the last attempt failed ...
    assert shown(env) == {current}  # ... what consumers get did not change
