"""Certification state per partition on the certification_state check of each certified product's served asset."""

import dagster as dg

from atlasmart_dagster.defs.assets.served import served_asset
from atlasmart_dagster.defs.automation.sensors import landing_manifest_sensor
from atlasmart_dagster.defs.checks.certification_checks import CERTIFICATION_STATE, report_certification_states
from atlasmart_dagster.ops.runs import run_chain
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster.store.tables import CERTIFIED_ASSETS
from atlasmart_dagster_tests.conftest import Env
from atlasmart_dagster_tests.defs.checks.graph_runs import (
    certify_via_sensor,
    check_history,
    evaluations,
    graph_backfill,
)
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAY = "2026-09-20"


def _latest(env: Env, product: str, partition: str) -> dg.AssetCheckEvaluation:
    """The newest evaluation of the product's certification_state check for ``partition`` (in a run or runless)."""
    history = check_history(env, served_asset(product), CERTIFICATION_STATE)
    evaluations = [r.event.dagster_event.asset_check_evaluation_data for r in history]
    for_day = [e for e in evaluations if e.metadata["partition"].value == partition]
    assert for_day, f"no {CERTIFICATION_STATE} evaluation of {product} for {partition}"
    return for_day[0]


def test_certifying_a_day_reports_certified_v1_for_that_partition(tmp_path):
    env = Env(tmp_path)
    outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill", certify=False)
    certify_via_sensor(env, outcome.run_id)
    for asset in CERTIFIED_ASSETS:
        evaluation = _latest(env, asset, DAY)
        served = env.ledger.partitions.served(asset, DAY).certification
        assert evaluation.passed, evaluation.description
        assert evaluation.metadata["state"].value == "CERTIFIED"
        assert evaluation.metadata["version"].value == 1
        assert evaluation.metadata["fingerprint"].value == served.fingerprint
        assert evaluation.metadata["certified_at"].value == served.recorded_at
        assert isinstance(evaluation.metadata["snapshot_id"].value, str)  # an id: nothing to plot
        assert evaluation.description.startswith(f"{DAY} CERTIFIED v1")


def test_a_delayed_day_reports_failed_with_the_reason(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-21T09:00:00Z")  # 2026-09-20 is current and overdue
    (env.day_dir(DAY) / "_manifest.json").unlink()
    assert not run_chain(env.defs, env.instance, env.platform, [DAY], lane="current").success  # blocked upstream

    reported = report_certification_states(env.instance, env.platform, [DAY])
    assert {e.asset_key.to_user_string() for e in reported} == {served_asset(a) for a in CERTIFIED_ASSETS}
    evaluation = _latest(env, "mart_finance_daily_sales", DAY)
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.metadata["state"].value == "DELAYED"
    assert "blocked upstream" in evaluation.metadata["reason"].value
    assert evaluation.description.startswith(f"{DAY} DELAYED: blocked upstream")


def test_running_the_chain_from_the_asset_graph_runs_no_certification_state_check(tmp_path):
    """Before certification there is nothing to say: the check sits on the served asset, outside the chain."""
    env = Env(tmp_path)
    run = graph_backfill(env, [DAY])
    assert evaluations(run, CERTIFICATION_STATE) == []
    planned = env.instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED, limit=1000).records
    assert not [r for r in planned
                if r.event_log_entry.dagster_event.asset_check_planned_data.check_name == CERTIFICATION_STATE]
    certify_via_sensor(env, run.run_id)
    assert _latest(env, "mart_executive_revenue", DAY).metadata["state"].value == "CERTIFIED"


def test_a_new_batch_for_a_certified_day_shows_restatement_pending_while_v1_is_served(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-23T10:00:00Z")
    outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill", certify=False)
    certify_via_sensor(env, outcome.run_id)
    assert _latest(env, "metric_gross_revenue", DAY).metadata["state"].value == "CERTIFIED"
    rows = read_rows(env.day_dir(DAY))
    correction = {**rows[2], "source_seq": 209, "quantity": 2, "line_amount_usd": "100.00", "line_cost_usd": "60.00"}
    write_batch(env.day_dir(DAY), [correction], batch_id="ERP-20260920-02", ready_at="2026-09-23T09:30:00Z")

    for _ in range(2):  # the day's next state, reported again on the next tick: Dagster must accept both
        landing_manifest_sensor(dg.build_sensor_context(instance=env.instance, resources={"atlasmart": env.resource}))
    evaluation = _latest(env, "metric_gross_revenue", DAY)
    assert evaluation.metadata["state"].value == "RESTATEMENT_PENDING"
    assert evaluation.passed and evaluation.metadata["version"].value == 1  # consumers keep v1 meanwhile
    assert evaluation.description.startswith(f"{DAY} RESTATEMENT_PENDING (serving v1)")


def test_days_certified_together_share_one_row_per_product_and_other_days_keep_their_own(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")  # 2026-09-21 is current and overdue
    (env.day_dir("2026-09-21") / "_manifest.json").unlink()
    days = ["2026-09-18", "2026-09-19", "2026-09-20"]
    run_chain(env.defs, env.instance, env.platform, days, lane="backfill", certify=False)
    reported = report_certification_states(env.instance, env.platform, days + ["2026-09-21"])  # before the gate
    assert len(reported) == len(CERTIFIED_ASSETS) * 4  # nothing certified yet: a row per day, each with why
    certify_via_sensor(env)
    history = check_history(env, served_asset("mart_finance_daily_sales"), CERTIFICATION_STATE)
    newest = history[0].event.dagster_event.asset_check_evaluation_data
    assert newest.passed and newest.description.startswith("2026-09-18...2026-09-20 CERTIFIED v1: 3 days")
    served = env.ledger.partitions.served("mart_finance_daily_sales", "2026-09-19")
    assert newest.metadata["days"].value["2026-09-19"] == {
        "version": 1, "certified_at": served.certified_at, "fingerprint": served.certification.fingerprint}
