"""SLO checks never report a miss for a day that is not an SLO event; real misses still fail."""

import dagster as dg

from atlasmart_dagster.defs.assets.served import served_asset
from atlasmart_dagster.defs.checks.certification_checks import report_day_states
from atlasmart_dagster.defs.checks.slo_checks import SLO_CHECK_KEYS
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.defs.checks.graph_runs import (
    certify_via_sensor,
    check_history,
    check_only_run,
    checks_over_range,
    evaluations,
    graph_backfill,
)

DAYS = ["2026-09-18", "2026-09-19"]


def test_an_asset_graph_backfill_reports_certified_history_days_as_not_measured_never_missed(tmp_path):
    env = Env(tmp_path)  # system clock: the sample days are history
    certify_via_sensor(env, graph_backfill(env, DAYS, "uigraph1").run_id)
    assert all(env.ledger.partitions.served("mart_finance_daily_sales", d) for d in DAYS)
    assert not any(env.ledger.slos.records(d) for d in DAYS)  # delivered by a backfill: no SLO results

    assert evaluations(graph_backfill(env, DAYS, "uigraph2"), "slo_") == []  # a load run does not run them
    slo = evaluations(checks_over_range(env, DAYS, SLO_CHECK_KEYS), "slo_")  # the served assets' Execute checks
    assert [e.description for e in slo if "MISSED" in e.description] == []
    assert len(slo) == len(SLO_CHECK_KEYS) * len(DAYS)  # one per check and day
    assert sorted({e.partition for e in slo}) == DAYS
    for e in slo:
        # not measured is visibly not a pass: a WARN failure (a warning in the UI), never a miss
        assert not e.passed and e.severity == dg.AssetCheckSeverity.WARN, e.description
        assert e.metadata["measured"].value is False
        assert "delivered by a backfill" in e.metadata["not_measured_reason"].value
        assert e.description.startswith(f"{e.partition} NOT MEASURED") and "MISSED" not in e.description


def test_slo_check_history_holds_one_evaluation_per_planned_partition_and_nothing_skipped(tmp_path):
    env = Env(tmp_path)
    graph_backfill(env, DAYS)
    run = checks_over_range(env, DAYS, SLO_CHECK_KEYS)
    for key in SLO_CHECK_KEYS:
        records = [r for r in check_history(env, key.asset_key.to_user_string(), key.name) if r.run_id == run.run_id]
        assert sorted(r.partition for r in records) == DAYS, key  # no unpartitioned extra row
        assert "PLANNED" not in {r.status.value for r in records}, key  # none left PLANNED (shown as Skipped)


def test_the_current_day_past_its_deadline_and_recorded_misses_still_fail(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")  # 2026-09-21 was due at 08:30
    day = "2026-09-21"

    undelivered = {(e.asset_key.to_user_string(), e.check_name): e for e in evaluations(check_only_run(env, day, SLO_CHECK_KEYS), "slo_")}
    late = undelivered[(served_asset("mart_finance_daily_sales"), "slo_availability")]
    assert not late.passed and "MISSED by 30 min" in late.description and late.partition == day
    waiting = undelivered[(served_asset("mart_finance_daily_sales"), "slo_freshness")]
    # not measurable before delivery: a warning, not a pass
    assert not waiting.passed and waiting.severity == dg.AssetCheckSeverity.WARN
    assert waiting.metadata["measured"].value is False

    assert run_chain(env.defs, env.instance, env.platform, [day], lane="current").certified == [day]
    delivered = {(e.asset_key.to_user_string(), e.check_name): e for e in evaluations(check_only_run(env, day, SLO_CHECK_KEYS), "slo_")}
    recorded = delivered[(served_asset("mart_executive_revenue"), "slo_availability")]
    assert not recorded.passed and "MISSED" in recorded.description and recorded.metadata["measured"].value is True
    assert delivered[(served_asset("mart_executive_revenue"), "slo_completeness")].passed


def runless_rows(env: Env, key: dg.AssetCheckKey) -> list[dg.AssetCheckEvaluation]:
    return [r.event.dagster_event.asset_check_evaluation_data
            for r in check_history(env, key.asset_key.to_user_string(), key.name) if not r.run_id]


def test_backfilled_days_read_not_measured_with_why_in_one_row_per_decision(tmp_path):
    env = Env(tmp_path)  # system clock: the sample days are history
    outcome = run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill", certify=False)
    certify_via_sensor(env, outcome.run_id)
    certify_via_sensor(env)  # the next tick, and another path, say the same: no new row
    report_day_states(env.instance, env.platform, DAYS)
    for key in SLO_CHECK_KEYS:
        (row,) = runless_rows(env, key)
        objective = key.name.removeprefix("slo_")
        assert not row.passed and row.severity == dg.AssetCheckSeverity.WARN
        assert row.description.startswith(f"2026-09-18...2026-09-19 NOT MEASURED ({objective}): delivered by a backfill")
        assert row.metadata["days"].value == DAYS and row.metadata["measured"].value is False


def test_a_recorded_miss_is_shown_for_its_day_in_the_run_it_judges_and_once(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")  # 2026-09-21 was due at 08:30
    day = "2026-09-21"
    outcome = run_chain(env.defs, env.instance, env.platform, [day], lane="current")
    assert outcome.certified == [day]
    report_day_states(env.instance, env.platform, [day])  # reported again by another path
    key = dg.AssetCheckKey(dg.AssetKey(served_asset("mart_finance_daily_sales")), "slo_availability")
    assert not runless_rows(env, key)
    # A measured day served: recorded in the run that built what is served, with its day, so the check's
    # Partitions tab counts it (test_served_checks_in_ui.py).
    (record,) = check_history(env, key.asset_key.to_user_string(), key.name)
    assert record.run_id == outcome.run_id and record.partition == day
    row = record.event.dagster_event.asset_check_evaluation_data
    assert not row.passed and row.description.startswith(f"{day} availability") and "MISSED by" in row.description
    assert row.metadata["partition"].value == day and row.metadata["measured"].value is True
