"""Every run of the chain carries its lane, whoever launched it: the run coordinator and the first step stamp it."""

import dagster as dg
import pytest

from atlasmart_dagster.ops.runs.lane_coordinator import LaneRunCoordinator, lane_tags
from atlasmart_dagster.product.lanes import LANE_TAG
from atlasmart_dagster.store.clock import LogicalClock, parse_ts
from atlasmart_dagster.store.instance.dagster_instance import packaged_instance_config
from atlasmart_dagster_tests.environment import Env

NOW = parse_ts("2026-09-22T08:10:00Z")  # 2026-09-21 is the current day


@pytest.mark.parametrize(
    "tags, lane",
    [
        ({"dagster/partition": "2026-09-21"}, "current"),  # the job page, the current day alone
        ({"dagster/partition": "2026-09-20"}, "backfill"),  # the job page, an older day
        ({"dagster/asset_partition_range_start": "2026-09-17", "dagster/asset_partition_range_end": "2026-09-21"},
         "backfill"),
        ({"dagster/backfill": "abc", "dagster/partition": "2026-09-21"}, "backfill"),  # any run of a backfill
        ({LANE_TAG: "current", "dagster/partition": "2026-09-21"}, None),  # tagged already: kept
        ({}, None),  # unpartitioned jobs (golden checks, reference data) have no lane
    ],
)
def test_lane_tags_follow_what_the_run_is(tags, lane):
    assert lane_tags(tags, NOW) == ({LANE_TAG: lane} if lane else {})


def test_the_packaged_instances_queue_through_the_lane_coordinator(tmp_path):
    import yaml

    for team in (False, True):
        config = yaml.safe_load(packaged_instance_config(team).read_text())
        assert config["run_coordinator"]["module"] == LaneRunCoordinator.__module__
        assert config["run_coordinator"]["class"] == LaneRunCoordinator.__name__


def test_a_queued_run_is_stamped_before_the_queue_applies_the_lane_limits(tmp_path, monkeypatch):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set(NOW)
    monkeypatch.setenv("ATLASMART_HOME", str(env.home))
    monkeypatch.setenv("ATLASMART_CLOCK", "logical")
    # What the queue (Dagster's QueuedRunCoordinator) is handed: the run as stored when it enqueues it.
    enqueued = {}

    def enqueue(self, context):
        enqueued[context.dagster_run.run_id] = self._instance.get_run_by_id(context.dagster_run.run_id).tags
        return context.dagster_run

    monkeypatch.setattr(dg.QueuedRunCoordinator, "submit_run", enqueue)
    (tmp_path / "dagster").mkdir()
    overrides = {"run_coordinator": {"module": LaneRunCoordinator.__module__, "class": LaneRunCoordinator.__name__}}
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster"), overrides=overrides) as instance:
        assert isinstance(instance.run_coordinator, LaneRunCoordinator)
        job = env.defs.resolve_job_def("daily_sales_job")
        for day, lane in (("2026-09-21", "current"), ("2026-09-20", "backfill")):
            run = instance.create_run_for_job(job, tags={"dagster/partition": day})
            assert LANE_TAG not in run.tags  # as the job page submits it
            instance.run_coordinator.submit_run(dg.SubmitRunContext(run, workspace=None))
            assert enqueued[run.run_id][LANE_TAG] == lane


def test_a_run_executed_in_its_own_process_is_stamped_by_its_first_step(tmp_path):
    """``dagster asset materialize`` never passes a run coordinator."""
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set(NOW)
    result = env.defs.resolve_job_def("daily_sales_job").execute_in_process(
        instance=env.instance, partition_key="2026-09-21")
    assert result.success
    assert env.instance.get_run_by_id(result.run_id).tags[LANE_TAG] == "current"
