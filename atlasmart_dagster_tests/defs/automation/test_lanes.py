"""Lanes derive from what a run is, whichever way it was launched (UI job page, asset graph, schedule, sensor)."""

from datetime import datetime, timezone

import dagster as dg
import pytest
import yaml

from atlasmart_dagster.defs.automation.schedules import daily_sales_schedule
from atlasmart_dagster.defs.automation.sensors import landing_manifest_sensor
from atlasmart_dagster.defs.partitions import range_tags
from atlasmart_dagster.errors import LaneViolation
from atlasmart_dagster.product.lanes import DAGSTER_BACKFILL_TAG, LANE_TAG, guard_backfill_scope, lane_of
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster.store.instance.dagster_instance import packaged_instance_config
from atlasmart_dagster.store.ledger.partition_states import BUILT
from atlasmart_dagster_tests.environment import Env

NOW = datetime(2026, 9, 22, 9, 0, tzinfo=timezone.utc)  # the current partition is 2026-09-21


def test_a_run_dagster_made_for_a_backfill_is_backfill_lane_whatever_lane_tag_it_inherited():
    assert lane_of({LANE_TAG: "current", DAGSTER_BACKFILL_TAG: "abcdefgh"}) == "backfill"
    assert lane_of({LANE_TAG: "current", DAGSTER_BACKFILL_TAG: "abcdefgh"}, NOW) == "backfill"
    assert lane_of({LANE_TAG: "current"}) == "current"  # a scheduled or sensed current-day load
    assert lane_of({LANE_TAG: "backfill"}) == "backfill"


def test_an_untagged_manual_run_is_judged_by_its_partitions():
    assert lane_of({"dagster/partition": "2026-09-21"}, NOW) == "current"
    assert lane_of({"dagster/partition": "2026-09-19"}, NOW) == "backfill"
    assert lane_of(range_tags("2026-09-20", "2026-09-21"), NOW) == "backfill"
    assert lane_of({"dagster/partition": "2026-09-21"}) == "manual"  # no time, no judgement
    assert lane_of({}, NOW) == "manual"  # unpartitioned (reference data)


def test_the_current_day_guard_applies_to_every_backfill_lane_run():
    tags_seen = [
        {LANE_TAG: "current", DAGSTER_BACKFILL_TAG: "abcdefgh"},  # job-page backfill of a lane-tagged job
        {DAGSTER_BACKFILL_TAG: "abcdefgh"},  # asset-graph backfill
        range_tags("2026-09-20", "2026-09-21"),  # dagster asset materialize --partition-range
    ]
    for tags in tags_seen:
        # A LaneViolation is permanent: the step fails at once, no retry rewrites the current day.
        with pytest.raises(LaneViolation) as refused:
            guard_backfill_scope(tags, ["2026-09-20", "2026-09-21"], NOW)
        assert str(refused.value) == (
            "backfill lane may not rewrite the current partition 2026-09-21; name it explicitly with the tag "
            "atlasmart/include_current=true (atlasmart backfill --include-current)"
        ), tags
    guard_backfill_scope({**tags_seen[0], "atlasmart/include_current": "true"}, ["2026-09-21"], NOW)
    guard_backfill_scope({"dagster/partition": "2026-09-21"}, ["2026-09-21"], NOW)  # the current day's own load


def _limits_counting(tags: dict[str, str]) -> list[dict]:
    """The instance's tag_concurrency_limits a run with ``tags`` counts against (as Dagster's run queue matches them)."""
    config = yaml.safe_load(packaged_instance_config().read_text())
    limits = config["concurrency"]["runs"]["tag_concurrency_limits"]
    return [lim for lim in limits if lim["key"] in tags and ("value" not in lim or lim["value"] == tags[lim["key"]])]


def test_a_job_page_backfill_including_the_current_day_is_refused_and_counts_in_the_backfill_lane_only(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")
    job = env.defs.resolve_job_def("daily_sales_job")
    # What Dagster adds to each run of a backfill launched from the job page; it merges the job's tags itself.
    backfill_tags = {DAGSTER_BACKFILL_TAG: "uibackfl", **range_tags("2026-09-20", "2026-09-21")}
    result = job.execute_in_process(instance=env.instance, tags=backfill_tags, raise_on_error=False)

    run_tags = env.instance.get_run_by_id(result.run_id).tags
    assert run_tags[DAGSTER_BACKFILL_TAG] == "uibackfl"
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failure.step_key == "raw_order_lines"
    assert "may not rewrite the current partition 2026-09-21" in str(failure.step_failure_data.error.message)
    assert not env.ledger.partitions.events(states=(BUILT,)), "nothing may be built"
    counted = _limits_counting(dict(run_tags))
    assert counted and all(lim.get("value") != "current" for lim in counted), counted


def test_daily_sales_job_carries_no_lane_tag_while_schedule_and_sensor_requests_do(tmp_path):
    env = Env(tmp_path, clock="logical")
    assert LANE_TAG not in env.defs.resolve_job_def("daily_sales_job").tags
    assert env.defs.resolve_job_def("backfill_sales_job").tags[LANE_TAG] == "backfill"

    scheduled = daily_sales_schedule(dg.build_schedule_context(scheduled_execution_time=NOW.replace(hour=8),
                                                               resources={"atlasmart": env.resource}))
    assert scheduled.job_name in (None, "daily_sales_job") and scheduled.tags[LANE_TAG] == "current"

    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")
    context = dg.build_sensor_context(instance=env.instance, resources={"atlasmart": env.resource})
    requests = {r.partition_key: r for r in landing_manifest_sensor(context).run_requests}
    assert requests["2026-09-21"].job_name == "daily_sales_job" and requests["2026-09-21"].tags[LANE_TAG] == "current"
    assert requests["2026-09-19"].job_name == "backfill_sales_job"
    assert requests["2026-09-19"].tags[LANE_TAG] == "backfill"
