"""Checks in a partitioned run report one result per planned partition: nothing in their history reads "Skipped"."""

import dagster as dg

from atlasmart_dagster.drills.faults import corrupt_aggregate_cost
from atlasmart_dagster.ops.runs.chains import run_chain, run_checks
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.defs.checks.graph_runs import check_history
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAYS = ["2026-09-18", "2026-09-19"]


def planned_checks(env: Env, run_id: str) -> set[tuple[dg.AssetCheckKey, str]]:
    """(check, partition) pairs Dagster planned for the run."""
    planned = env.instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED, limit=10_000
    ).records
    return {
        (data.asset_check_key, partition)
        for data in (r.event_log_entry.dagster_event.asset_check_planned_data for r in planned)
        for partition in data.partitions_subset.get_partition_keys()
    }


def history_of_run(env: Env, run_id: str, keys) -> dict[tuple[dg.AssetCheckKey, str | None], str]:
    rows = {}
    for key in keys:
        for record in check_history(env, key.asset_key.to_user_string(), key.name):
            if record.run_id == run_id:
                rows[(key, record.partition)] = record.status.value
    return rows


def test_a_range_run_completes_every_planned_check_partition(tmp_path):
    env = Env(tmp_path)
    outcome = run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill", certify=False)
    assert outcome.success, outcome.failures
    planned = planned_checks(env, outcome.run_id)
    keys = {key for key, _ in planned}
    assert len(keys) == 12 and {p for _, p in planned} == set(DAYS)
    assert len(planned) == len(keys) * len(DAYS)  # every check planned once per day

    history = history_of_run(env, outcome.run_id, keys)
    assert set(history) == planned  # no unpartitioned extra row, no planned day without a result
    assert set(history.values()) == {"SUCCEEDED"}  # none left PLANNED (the UI shows those as Skipped)
    evaluations = outcome.result.get_asset_check_evaluations()
    assert sorted((e.asset_check_key.to_user_string(), e.partition) for e in evaluations) == sorted(
        (k.to_user_string(), p) for k, p in planned
    )
    for e in evaluations:
        assert e.metadata["partition"].value == e.partition
        assert set(e.metadata["observed_vs_expected"].value) == {e.partition}


def test_a_range_run_fails_a_check_on_its_bad_day_only_and_still_blocks(tmp_path):
    env = Env(tmp_path)
    rows = read_rows(env.day_dir(DAYS[1]))
    for row in rows:
        row["gross_line_amount_usd"] = row.pop("line_amount_usd")
    write_batch(env.day_dir(DAYS[1]), rows, batch_id="ERP-20260919-01")
    outcome = run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill")
    assert not outcome.success and outcome.certified == []
    assert {e.asset_key.to_user_string() for e in outcome.result.get_asset_materialization_events()} == {"raw_order_lines"}
    key = dg.AssetCheckKey(dg.AssetKey("raw_order_lines"), "source_contract_conforms")
    assert history_of_run(env, outcome.run_id, [key]) == {(key, DAYS[0]): "SUCCEEDED", (key, DAYS[1]): "FAILED"}


def test_a_check_run_alone_reports_the_day_it_checked(tmp_path):
    """Executing checks without their asset (nothing materialized): the partitioned check is planned for the day,
    and reports that day (it shows in the Partition column)."""
    env = Env(tmp_path)
    assert run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill").success
    corrupt_aggregate_cost(env.platform, DAYS[1], +10)
    key = dg.AssetCheckKey(dg.AssetKey("agg_daily_sales"), "agg_matches_fact")
    detection = run_checks(env.defs, env.instance, [key], DAYS[1])
    assert not detection.success
    (evaluation,) = detection.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.metadata["failing_partitions"].value == DAYS[1]
    assert evaluation.partition == DAYS[1]
    assert history_of_run(env, detection.run_id, [key]) == {(key, DAYS[1]): "FAILED"}  # nothing left planned
