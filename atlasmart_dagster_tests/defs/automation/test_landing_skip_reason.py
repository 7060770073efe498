"""landing_manifest_sensor's skip reason says what the landing zone holds and what the sensor waits for."""

import dagster as dg

from atlasmart_dagster.defs.automation.sensors import landing_manifest_sensor
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch


def _skip_message(env: Env) -> str:
    result = landing_manifest_sensor(dg.build_sensor_context(instance=env.instance, resources={"atlasmart": env.resource}))
    assert isinstance(result, dg.SkipReason), result
    return result.skip_message


def test_skip_reason_counts_loaded_batches_and_names_the_awaited_day_and_the_skipped_ones(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")
    history, current = SAMPLE_DAYS[:-1], SAMPLE_DAYS[-1]
    assert run_chain(env.defs, env.instance, env.platform, history, lane="backfill", certify=False).success
    assert run_chain(env.defs, env.instance, env.platform, [current], lane="current", certify=False).success

    assert _skip_message(env) == "all 5 landed batches already loaded; waiting for 2026-09-22"

    # a re-delivery that declares itself ready later is landed but waits, and the reason says so
    rows = read_rows(env.day_dir("2026-09-20"))
    write_batch(env.day_dir("2026-09-20"), rows, batch_id="ERP-20260920-02", ready_at="2026-09-22T10:00:00Z")
    assert _skip_message(env) == (
        "4 of 5 landed batches already loaded; waiting for 2026-09-22; skipped 1 day: "
        "2026-09-20: manifest declares ready_at 2026-09-22T10:00:00+00:00 (in the future)"
    )


def test_skip_reason_of_an_empty_landing_zone_names_the_current_day(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")
    for day in SAMPLE_DAYS:
        for f in env.day_dir(day).iterdir():
            f.unlink()
        env.day_dir(day).rmdir()
    assert _skip_message(env) == "landing zone empty; waiting for 2026-09-21"
