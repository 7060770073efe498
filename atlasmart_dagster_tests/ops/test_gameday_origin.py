"""A tick's runs carry the tags Dagster's UI reads for who launched a run, as the daemon's would, and which tick."""

from atlasmart_dagster.ops.gameday import (
    RUN_KEY_TAG,
    SCHEDULE_NAME_TAG,
    SCHEDULED_EXECUTION_TIME_TAG,
    SENSOR_NAME_TAG,
    TICK_TAG,
    tick,
)
from atlasmart_dagster_tests.environment import Env


def test_tick_runs_name_the_schedule_or_sensor_that_started_them_and_the_tick(tmp_path):
    env = Env(tmp_path, clock="logical")
    env.platform.clock.set("2026-09-22T08:20:00Z")
    report = tick(env.defs, env.instance, env.platform)
    assert report.scheduled == ["2026-09-21"] and report.sensor
    runs = {run.tags["dagster/partition"]: run.tags for run in env.instance.get_runs()}
    assert set(runs) == {"2026-09-21", *report.sensor}

    scheduled = runs["2026-09-21"]
    assert (scheduled.get(SCHEDULE_NAME_TAG), scheduled.get(SENSOR_NAME_TAG)) == ("daily_sales_schedule", None)
    # the morning it was the 08:00 of, as the daemon writes it, and the schedule's own run key
    assert scheduled[SCHEDULED_EXECUTION_TIME_TAG] == "2026-09-22T08:00:00+00:00"
    assert scheduled[RUN_KEY_TAG] == "schedule-2026-09-21"
    assert scheduled[TICK_TAG] == report.at == "2026-09-22T08:20:00Z"

    batches = {b["partition"]: b["batch_id"] for b in env.platform.ledger.batches.list()}
    for day in report.sensor:
        tags = runs[day]
        assert (tags.get(SCHEDULE_NAME_TAG), tags.get(SENSOR_NAME_TAG)) == (None, "landing_manifest_sensor")
        assert SCHEDULED_EXECUTION_TIME_TAG not in tags
        assert tags[RUN_KEY_TAG] == batches[day]  # the sensor's run key: the batch it loads
        assert tags[TICK_TAG] == report.at
