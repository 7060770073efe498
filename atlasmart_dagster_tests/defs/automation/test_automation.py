"""The daily schedule and the landing manifest sensor."""

from datetime import datetime, timezone

import dagster as dg

from atlasmart_dagster.defs.automation.schedules import daily_sales_schedule
from atlasmart_dagster.defs.automation.sensors import landing_manifest_sensor
from atlasmart_dagster.ops.runs import run_chain
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster.store.ledger.partition_states import RESTATEMENT_PENDING
from atlasmart_dagster_tests.conftest import Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch


def test_schedule_runs_yesterday_in_the_current_lane_at_0800_utc():
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 9, 22, 8, 0, tzinfo=timezone.utc))
    request = daily_sales_schedule(context)
    assert request.partition_key == "2026-09-21"
    assert request.tags["atlasmart/lane"] == "current"
    assert daily_sales_schedule.cron_schedule == "0 8 * * *" and daily_sales_schedule.execution_timezone == "UTC"


def logical_env(tmp_path, now: str) -> Env:
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set(now)
    return env


def evaluate(env):
    context = dg.build_sensor_context(instance=env.instance, resources={"atlasmart": env.resource})
    return landing_manifest_sensor(context)


def test_sensor_waits_for_the_manifest_and_says_why(tmp_path):
    env = logical_env(tmp_path, "2026-09-22T08:02:00Z")
    for day in ("2026-09-17", "2026-09-18", "2026-09-19", "2026-09-20"):
        for f in env.day_dir(day).iterdir():
            f.unlink()
        env.day_dir(day).rmdir()
    result = evaluate(env)
    assert isinstance(result, dg.SkipReason)
    assert "2026-09-21: manifest declares ready_at 2026-09-22T08:04:00+00:00 (in the future)" in result.skip_message

    (env.day_dir("2026-09-21") / "_manifest.json").rename(env.root / "held_manifest.json")
    result = evaluate(env)
    assert "2026-09-21: manifest not landed yet" in result.skip_message

    (env.root / "held_manifest.json").rename(env.day_dir("2026-09-21") / "_manifest.json")
    LogicalClock(env.home / "clock.json").set("2026-09-22T08:05:00Z")
    (request,) = evaluate(env).run_requests
    assert request.partition_key == "2026-09-21" and request.run_key == "ERP-20260921-01"
    assert request.tags["atlasmart/lane"] == "current" and request.job_name == "daily_sales_job"


def test_new_batch_for_a_certified_day_is_restatement_pending_in_the_backfill_lane(tmp_path):
    env = logical_env(tmp_path, "2026-09-22T09:00:00Z")
    assert run_chain(env.defs, env.instance, env.platform, ["2026-09-20"], lane="backfill").certified == ["2026-09-20"]
    rows = read_rows(env.day_dir("2026-09-20"))
    late = {**rows[2], "source_seq": 209, "line_amount_usd": "55.00"}
    write_batch(env.day_dir("2026-09-20"), [late], batch_id="ERP-20260920-02", ready_at="2026-09-22T08:50:00Z")
    requests = {r.partition_key: r for r in evaluate(env).run_requests}
    request = requests["2026-09-20"]
    assert request.job_name == "backfill_sales_job" and request.tags["atlasmart/lane"] == "backfill"
    assert request.run_key == "ERP-20260920-02"
    pending = env.ledger.partitions.events(partition="2026-09-20", states=(RESTATEMENT_PENDING,))
    assert {e.asset for e in pending} == {"metric_gross_revenue", "mart_finance_daily_sales", "mart_executive_revenue"}
    evaluate(env)  # a second tick does not mark it twice
    assert len(env.ledger.partitions.events(partition="2026-09-20", states=(RESTATEMENT_PENDING,))) == 3


def _after_run(env, run_id):
    """Evaluate certification_sensor for a finished run, as the daemon would."""
    from atlasmart_dagster.defs.automation.sensors import certification_sensor

    run = env.instance.get_run_by_id(run_id)
    (event,) = [e for e in env.instance.all_logs(run_id) if e.dagster_event and e.dagster_event.event_type == dg.DagsterEventType.RUN_SUCCESS]
    context = dg.build_run_status_sensor_context(
        sensor_name="certification_sensor", dagster_event=event.dagster_event, dagster_instance=env.instance,
        dagster_run=run, resources={"atlasmart": env.resource},
    )
    return certification_sensor(context)


def test_certification_sensor_requests_golden_checks_for_new_certifications_only(tmp_path):
    env = Env(tmp_path)
    outcome = run_chain(env.defs, env.instance, env.platform, ["2026-09-20"], lane="backfill", certify=False)
    request = _after_run(env, outcome.run_id)
    assert isinstance(request, dg.RunRequest) and request.run_key == f"golden-{outcome.run_id}"
    assert env.platform.ledger.partitions.served("mart_finance_daily_sales", "2026-09-20")

    golden = env.defs.resolve_job_def("dashboard_checks_job").execute_in_process(instance=env.instance)
    assert golden.success
    # the golden run certifies the dashboards, and must not ask for another golden run (a loop)
    assert _after_run(env, golden.run_id) is None
    assert env.platform.ledger.partitions.served("dashboard_finance_daily_sales", "2026-09-20")
    assert _after_run(env, outcome.run_id) is None  # already decided: nothing new
