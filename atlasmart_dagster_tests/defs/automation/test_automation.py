"""The daily schedule and the landing manifest sensor."""

from datetime import datetime, timezone

import dagster as dg

from atlasmart_dagster.defs.automation.schedules import daily_sales_schedule
from atlasmart_dagster.defs.automation.sensors import landing_manifest_sensor
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster.store.ledger.partition_states import RESTATEMENT_PENDING
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch


def _scheduled(env, at=datetime(2026, 9, 22, 8, 0, tzinfo=timezone.utc)):
    context = dg.build_schedule_context(scheduled_execution_time=at, resources={"atlasmart": env.resource})
    return daily_sales_schedule(context)


def test_schedule_runs_yesterday_in_the_current_lane_at_0800_utc(tmp_path):
    request = _scheduled(Env(tmp_path))
    assert request.partition_key == "2026-09-21"
    assert request.tags["atlasmart/lane"] == "current"
    assert daily_sales_schedule.cron_schedule == "0 8 * * *" and daily_sales_schedule.execution_timezone == "UTC"


def test_schedule_never_reloads_a_delivered_day_without_new_source_data(tmp_path):
    """The landing sensor loaded 2026-09-21 as its manifest landed; the schedule must not rebuild it from the same batch."""
    env = logical_env(tmp_path, "2026-09-22T08:06:00Z")
    run_chain(env.defs, env.instance, env.platform, ["2026-09-21"], lane="current")
    served = env.ledger.partitions.served("mart_finance_daily_sales", "2026-09-21")
    assert served is not None
    skipped = _scheduled(env)
    assert isinstance(skipped, dg.SkipReason) and "already loaded from batch ERP-20260921-01" in skipped.skip_message

    # New source data for the day is a reason to load it again.
    rows = read_rows(env.day_dir("2026-09-21"))
    write_batch(env.day_dir("2026-09-21"), rows, batch_id="ERP-20260921-02", ready_at="2026-09-22T08:05:00Z")
    assert _scheduled(env).partition_key == "2026-09-21"


def test_a_reload_of_identical_data_keeps_the_served_certified_at(tmp_path):
    env = logical_env(tmp_path, "2026-09-22T08:06:00Z")
    run_chain(env.defs, env.instance, env.platform, ["2026-09-21"], lane="current")
    first = env.ledger.partitions.served("mart_finance_daily_sales", "2026-09-21")
    LogicalClock(env.home / "clock.json").set("2026-09-22T08:30:00Z")
    run_chain(env.defs, env.instance, env.platform, ["2026-09-21"], lane="current")  # a manual reload
    again = env.ledger.partitions.served("mart_finance_daily_sales", "2026-09-21")
    assert again.certification.id != first.certification.id  # the reload was certified ...
    assert (again.version, again.certification.fingerprint) == (first.version, first.certification.fingerprint)
    assert again.certified_at == first.certified_at == "2026-09-22T08:06:00Z"  # ... and consumers' date did not move


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


def _after_run(env, run_id=None):
    """One tick of certification_sensor, as the daemon would evaluate it (the cursor kept between ticks)."""
    from atlasmart_dagster.defs.automation.certification_sensor import certification_sensor

    context = dg.build_sensor_context(instance=env.instance, resources={"atlasmart": env.resource},
                                      cursor=getattr(env, "certification_cursor", None))
    result = certification_sensor(context)
    env.certification_cursor = context.cursor
    if isinstance(result, dg.SensorResult):
        return result.run_requests[0] if len(result.run_requests) == 1 else result.run_requests
    return None


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
