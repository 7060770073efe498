"""The certification_state check is each served asset's headline: every evaluation states the whole asset."""

import asyncio
import re
import shutil

import dagster as dg
# What the webserver's executionForLatestMaterialization resolver is given; no public equivalent exists.
from dagster._core.loader import LoadingContextForTest

from atlasmart_dagster.defs.assets.served import served_asset
from atlasmart_dagster.defs.automation.sensors import landing_manifest_sensor
from atlasmart_dagster.defs.checks.certification_checks import (
    CERTIFICATION_CHECK_KEYS,
    CERTIFICATION_STATE,
    day_ranges,
    report_day_states,
)
from atlasmart_dagster.defs.checks.slo_checks import SLO_CHECK_KEYS
from atlasmart_dagster.defs.checks.open_incidents import OPEN_INCIDENTS
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.serving import known_partitions, partition_statuses
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster.store.tables import CERTIFIED_ASSETS
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.defs.checks.graph_runs import (
    certify_via_sensor,
    check_history,
    evaluations,
    graph_backfill,
    graph_selection_job,
)
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch
from atlasmart_dagster_tests.product.test_anomaly_guard import day_rows, land

DAY = "2026-09-20"
MART = "mart_finance_daily_sales"


def headline(env: Env, product: str = MART) -> dg.AssetCheckEvaluation:
    """The newest evaluation of the served asset's certification_state: what its Checks tab shows."""
    record = env.instance.get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey(served_asset(product)), CERTIFICATION_STATE))
    assert record is not None and record.event is not None, f"no {CERTIFICATION_STATE} on {served_asset(product)}"
    return record.event.dagster_event.asset_check_evaluation_data


def shown_as_current(env: Env, key: dg.AssetCheckKey) -> bool:
    """Whether the UI shows the check's newest execution against the asset's newest materialization
    (otherwise it reads "Not Evaluated")."""
    record = env.instance.get_latest_asset_check_evaluation_record(key)
    return record is not None and asyncio.run(
        record.targets_latest_materialization(LoadingContextForTest(env.instance)))


def test_day_ranges_join_consecutive_days_and_name_no_other():
    assert day_ranges(["2026-09-21", "2026-09-17", "2026-09-18", "2026-09-19"]) == "2026-09-17...2026-09-19, 2026-09-21"
    assert day_ranges(["2026-09-17", "2026-09-18", "2026-09-19", "2026-09-21"]) != "2026-09-17...2026-09-21"
    assert day_ranges([]) == ""


def test_one_certified_day_does_not_make_the_headline_pass_while_other_due_days_are_unserved(tmp_path):
    env = Env(tmp_path)  # system clock: every sample day is due
    outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill", certify=False)
    certify_via_sensor(env, outcome.run_id)
    for asset in CERTIFIED_ASSETS:
        evaluation = headline(env, asset)
        unserved = [d for d in SAMPLE_DAYS if d != DAY]
        assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
        assert evaluation.description.startswith(f"**1 of 5 due days served; not served: {unserved[0]} DELAYED")
        for day in unserved:
            assert f"- {day} DELAYED: due " in evaluation.description
        days = evaluation.metadata["days"].value
        served = env.ledger.partitions.states([DAY], [asset]).served(asset, DAY)
        assert days[DAY] == {"state": "CERTIFIED", "served": True, "version": 1, "certified_at": served.certified_at,
                             "fingerprint": served.certification.fingerprint, "reason": days[DAY]["reason"]}
        assert evaluation.metadata["changed"].value == DAY  # the row names its decision's day only
    # the same as `atlasmart status`, day by day
    statuses = {s.partition: s.state for s in partition_statuses(env.platform, known_partitions(env.platform))}
    assert {d: e["state"] for d, e in headline(env).metadata["days"].value.items()} == statuses


def test_a_held_anomaly_fails_the_headline_and_names_the_day_with_what_holds_it(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-21T09:00:00Z")  # 2026-09-17...2026-09-20 due
    for day in SAMPLE_DAYS:
        shutil.rmtree(env.day_dir(day))
    history = ["2026-09-17", "2026-09-18", "2026-09-19"]
    for i, day in enumerate(history):
        land(env, day, day_rows(day, 10, 1000 + 100 * i))
    assert run_chain(env.defs, env.instance, env.platform, history, lane="backfill").certified == history
    assert headline(env).passed and headline(env).description.startswith(
        "**all 3 due days served (2026-09-17...2026-09-19)**")

    land(env, DAY, day_rows(DAY, 10, 4000, scale=100))  # sent in cents
    assert run_chain(env.defs, env.instance, env.platform, [DAY], lane="current").certified == []
    for asset in CERTIFIED_ASSETS:
        evaluation = headline(env, asset)
        assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
        assert evaluation.description.startswith(f"**3 of 4 due days served; not served: {DAY} ANOMALY_HELD**")
        (line,) = [l for l in evaluation.description.splitlines() if l.startswith(f"- {DAY}")]
        assert "extreme jump" in line and "nothing new is served" in line, line
        assert evaluation.metadata["unserved_days"].value == f"{DAY} ANOMALY_HELD"
    # The check's history: one row per decision, each naming only its days.
    rows = [r.event.dagster_event.asset_check_evaluation_data
            for r in check_history(env, served_asset(MART), CERTIFICATION_STATE)]
    assert [r.metadata["changed"].value for r in rows] == [DAY, "2026-09-17...2026-09-19"]


def test_a_restatement_reported_by_two_paths_is_one_row(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-23T10:00:00Z")
    outcome = run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill", certify=False)
    certify_via_sensor(env, outcome.run_id)
    assert headline(env).passed
    rows = read_rows(env.day_dir(DAY))
    correction = {**rows[2], "source_seq": 209, "quantity": 2, "line_amount_usd": "100.00", "line_cost_usd": "60.00"}
    write_batch(env.day_dir(DAY), [correction], batch_id="ERP-20260920-02", ready_at="2026-09-23T09:30:00Z")
    before = len(check_history(env, served_asset(MART), CERTIFICATION_STATE))
    for _ in range(2):  # the day's next state, reported again on the next tick: one row
        landing_manifest_sensor(dg.build_sensor_context(instance=env.instance, resources={"atlasmart": env.resource}))
    report_day_states(env.instance, env.platform, [DAY])  # and once more by another path
    assert len(check_history(env, served_asset(MART), CERTIFICATION_STATE)) == before + 1
    evaluation = headline(env)
    assert evaluation.passed  # consumers keep v1 meanwhile
    assert f"- {DAY} RESTATEMENT_PENDING (serving v1): serving certified version 1" in evaluation.description
    assert "This evaluation: 2026-09-20 RESTATEMENT_PENDING (serving v1)" in evaluation.description


def test_a_load_run_from_the_asset_graph_runs_no_certification_state_check(tmp_path):
    """Before certification there is nothing to say: the check sits on the served asset, outside the chain."""
    env = Env(tmp_path)
    run = graph_backfill(env, [DAY])
    assert evaluations(run, CERTIFICATION_STATE) == []
    certify_via_sensor(env, run.run_id)
    assert headline(env, "mart_executive_revenue").metadata["days"].value[DAY]["state"] == "CERTIFIED"


def test_execute_all_evaluates_the_headline_and_open_incidents_and_neither_goes_stale(tmp_path):
    """*Execute all* on a served asset runs its launchable checks with no partition (the UI's
    ExecuteChecksButton; the SLO checks too: test_served_checks_in_runs.py); after the next certification
    both still read against the newest materialization."""
    env = Env(tmp_path)
    first = run_chain(env.defs, env.instance, env.platform, ["2026-09-19"], lane="backfill")
    assert first.certified == ["2026-09-19"]
    served = dg.AssetKey(served_asset(MART))
    launchable = [dg.AssetCheckKey(served, CERTIFICATION_STATE), dg.AssetCheckKey(served, OPEN_INCIDENTS)]
    graph = env.defs.resolve_asset_graph()
    assert all(len(graph.get_execution_set_asset_and_check_keys(k)) == 1 for k in launchable)  # "Execute" offered
    run = graph_selection_job(env, launchable).execute_in_process(instance=env.instance)
    assert run.success
    by_name = {e.check_name: e for e in run.get_asset_check_evaluations()}
    assert set(by_name) == {CERTIFICATION_STATE, OPEN_INCIDENTS}
    assert not by_name[CERTIFICATION_STATE].passed and "- 2026-09-20 DELAYED" in by_name[CERTIFICATION_STATE].description

    assert run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill").certified == [DAY]
    for key in launchable:
        assert shown_as_current(env, key), key
    assert headline(env).metadata["served_days"].value == 2
    assert all(shown_as_current(env, k) for k in CERTIFICATION_CHECK_KEYS)


def test_after_a_withdrawal_inside_a_range_no_row_names_a_range_across_the_withdrawn_day(tmp_path):
    """2026-09-17...2026-09-21 certified together, then 2026-09-20 withdrawn by containment: every row of the
    served asset's checks groups only days of one state or verdict, so none spans the withdrawn day."""
    from atlasmart_dagster.domain.check_names import AGG_MATCHES_FACT
    from atlasmart_dagster.drills.faults import corrupt_aggregate_cost
    from atlasmart_dagster.ops.response.incidents.workflow import IncidentWorkflow
    from atlasmart_dagster.ops.runs.chains import run_checks
    from atlasmart_dagster_tests.ops.response.incidents.faulted_days import tick

    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-23T09:00:00Z")
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").certified == SAMPLE_DAYS
    assert headline(env).description.startswith("**all 5 due days served (2026-09-17...2026-09-21)**")
    corrupt_aggregate_cost(env.platform, DAY, +10)
    assert not run_checks(env.defs, env.instance, [dg.AssetCheckKey(dg.AssetKey("agg_daily_sales"),
                                                                    AGG_MATCHES_FACT)], DAY).success
    tick(env)
    IncidentWorkflow(env.platform, env.defs, env.instance).contain("INC-0001", "oncall@atlasmart.example")
    certify_via_sensor(env)

    evaluation = headline(env)
    assert evaluation.description.startswith(f"**4 of 5 due days served; not served: {DAY} WITHDRAWN**")
    assert evaluation.metadata["changed"].value == DAY
    served = dg.AssetKey(served_asset(MART))
    rows = [r.event.dagster_event.asset_check_evaluation_data
            for key in [dg.AssetCheckKey(served, CERTIFICATION_STATE), *SLO_CHECK_KEYS[:4]]
            for r in check_history(env, served.to_user_string(), key.name)]
    assert rows and all(r.asset_key == served for r in rows)
    ranges = [(start, end, row.description) for row in rows
              for start, end in re.findall(r"(\d{4}-\d\d-\d\d)\.\.\.(\d{4}-\d\d-\d\d)", row.description or "")]
    assert ranges, "no row named a range of days: the check below would pass empty"
    for start, end, description in ranges:
        assert not start <= DAY <= end, description  # the withdrawn day is never inside a range
    slo = [r for r in rows if r.check_name == "slo_freshness"]
    assert sorted(r.description.split(" NOT MEASURED")[0] for r in slo) == ["2026-09-17...2026-09-19, 2026-09-21", DAY]
