"""A materialization recorded in an ended run is that run's, and a runless evaluation naming it reads against it.

This fails first on a Dagster upgrade that changes the internals the adapter
uses (``StepMaterializationData``, ``AssetCheckEvaluationTargetMaterializationData``,
``report_dagster_event``) or what a reader makes of the events: the asset's
records, its partitions, the run's own log, the check's current evaluation.
"""

import asyncio

import dagster as dg
import pytest
from dagster._core.loader import LoadingContextForTest

from atlasmart_dagster.defs.dagster_event_adapter import judging, report_materialization_in_run
from atlasmart_dagster.store.instance.dagster_instance import prepare_dagster_home
from atlasmart_dagster.store.home import AtlasmartHome

ASSET = dg.AssetKey("served_example")


@dg.op
def build():
    return 1


@dg.job
def build_job():
    build()


@pytest.fixture
def embedded_instance(tmp_path, monkeypatch):
    """The embedded home's own Dagster instance (its pooled SQLite storage), as the UI reads it."""
    folder = prepare_dagster_home(AtlasmartHome(tmp_path / "home"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    instance = dg.DagsterInstance.from_config(str(folder))
    try:
        yield instance
    finally:
        instance.dispose()


def test_a_materialization_reported_in_an_ended_run_is_that_runs_and_leaves_it_as_it_ended(embedded_instance):
    instance = embedded_instance
    result = build_job.execute_in_process(instance=instance)
    run = instance.get_run_by_id(result.run_id)
    assert run.status == dg.DagsterRunStatus.SUCCESS
    logged = len(instance.all_logs(run.run_id))

    report_materialization_in_run(instance, run, dg.AssetMaterialization(
        asset_key=ASSET, partition="2026-09-21", metadata={"version": 2}))

    (record,) = instance.fetch_materializations(ASSET, limit=10).records
    assert record.run_id == run.run_id  # what the UI resolves to a Run (else "Run None")
    assert record.event_log_entry.job_name == "build_job"
    assert record.asset_materialization.partition == "2026-09-21"
    assert record.asset_materialization.metadata["version"].value == 2
    assert instance.get_materialized_partitions(ASSET) == {"2026-09-21"}
    events = instance.all_logs(run.run_id)
    assert len(events) == logged + 1 and events[-1].dagster_event.asset_key == ASSET
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.SUCCESS
    # and a whole-asset wipe (how a withdrawal turns a served day missing) takes it along
    instance.wipe_assets([ASSET])
    assert instance.get_materialized_partitions(ASSET) == set()


def test_a_runless_report_has_the_empty_run_id_the_ui_reads_as_run_none(embedded_instance):
    """The contrast the adapter exists for: Dagster's public runless report names no run."""
    embedded_instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=ASSET, partition="2026-09-21"))
    (record,) = embedded_instance.fetch_materializations(ASSET, limit=10).records
    assert record.run_id == "" and embedded_instance.get_run_by_id(record.run_id) is None


def test_a_runless_evaluation_naming_the_materialization_reads_against_it_in_the_same_second(embedded_instance):
    """Without the name, Dagster compares "created after it" at one-second resolution: the same second misses."""
    instance = embedded_instance
    run = instance.get_run_by_id(build_job.execute_in_process(instance=instance).run_id)
    report_materialization_in_run(instance, run, dg.AssetMaterialization(asset_key=ASSET, partition="2026-09-21"))
    (newest,) = instance.fetch_materializations(ASSET, limit=1).records
    key = dg.AssetCheckKey(ASSET, "state")

    def current() -> bool:
        record = instance.get_latest_asset_check_evaluation_record(key)
        return asyncio.run(record.targets_latest_materialization(LoadingContextForTest(instance)))

    evaluation = dg.AssetCheckEvaluation(asset_key=ASSET, check_name="state", passed=True)
    named = judging(instance, evaluation)
    assert named.target_materialization_data.storage_id == newest.storage_id
    assert named.target_materialization_data.run_id == run.run_id
    instance.report_runless_asset_event(named)
    assert current()
    # a newer materialization makes it stale, as the UI shows it: said.py then says it again
    report_materialization_in_run(instance, run, dg.AssetMaterialization(asset_key=ASSET, partition="2026-09-22"))
    assert not current()
    instance.report_runless_asset_event(judging(instance, evaluation))
    assert current()
