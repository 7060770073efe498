"""A tick's runs carry the tags Dagster's UI reads for who launched a run, as the daemon's would."""

from atlasmart_dagster.ops.gameday import SCHEDULE_NAME_TAG, SENSOR_NAME_TAG, tick
from atlasmart_dagster_tests.environment import Env


def test_tick_runs_name_the_schedule_or_sensor_that_started_them(tmp_path):
    env = Env(tmp_path, clock="logical")
    env.platform.clock.set("2026-09-22T08:20:00Z")
    report = tick(env.defs, env.instance, env.platform)
    assert report.scheduled == ["2026-09-21"] and report.sensor
    origins = {}
    for run in env.instance.get_runs():
        origins[run.tags["dagster/partition"]] = (run.tags.get(SCHEDULE_NAME_TAG), run.tags.get(SENSOR_NAME_TAG))
    assert origins["2026-09-21"] == ("daily_sales_schedule", None)
    assert {origins[day] for day in report.sensor} == {(None, "landing_manifest_sensor")}
