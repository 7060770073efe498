"""Running the daily chain in-process against a real Dagster instance, then certifying.

The command line, the drills and the tests start runs through these functions
so that what they do is what the schedule, the sensors and the UI do: the same
jobs, the same lane tags, and the same certification gate after the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import dagster as dg

from .automation.jobs import backfill_sales_job, daily_sales_job
from .certification import GateDecision, certify_run
from .lanes import BACKFILL, CURRENT, LANE_TAG, current_partition
from .partitions import range_tags
from .platform import Platform


@dataclass
class RunOutcome:
    run_id: str
    partitions: list[str]
    lane: str
    success: bool
    failures: list[str] = field(default_factory=list)
    decisions: list[GateDecision] = field(default_factory=list)
    result: dg.ExecuteInProcessResult | None = field(default=None, repr=False)

    @property
    def certified(self) -> list[str]:
        return sorted({d.partition for d in self.decisions if d.certified})

    def to_json(self) -> dict:
        return {
            "run_id": self.run_id,
            "partitions": self.partitions,
            "lane": self.lane,
            "success": self.success,
            "failures": self.failures,
            "certified": self.certified,
            "refused": [d.to_json() for d in self.decisions if not d.certified],
        }


def failure_messages(result: dg.ExecuteInProcessResult) -> list[str]:
    """One line per failed step: the Failure's description, else the error's first line."""
    messages = []
    for event in result.all_events:
        if event.event_type != dg.DagsterEventType.STEP_FAILURE:
            continue
        data = event.step_failure_data
        if data.user_failure_data is not None and data.user_failure_data.description:
            text = data.user_failure_data.description
        elif data.error is not None:
            text = data.error.message.strip().splitlines()[0]
        else:
            text = "step failed"
        messages.append(f"{event.step_key}: {text}")
    return messages


def lane_for(platform: Platform, partitions: Sequence[str]) -> str:
    """Current lane only for the current day; anything older is backfill-lane work."""
    current = current_partition(platform.clock.now())
    return CURRENT if list(partitions) == [current] else BACKFILL


def run_chain(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    platform: Platform,
    partitions: Sequence[str],
    lane: str | None = None,
    tags: Mapping[str, str] | None = None,
    certify: bool = True,
) -> RunOutcome:
    """One run of the daily chain over ``partitions`` (a single day or a contiguous range)."""
    partitions = sorted(partitions)
    lane = lane or lane_for(platform, partitions)
    job = defs.resolve_job_def((daily_sales_job if lane == CURRENT else backfill_sales_job).name)
    run_tags = {LANE_TAG: lane, **(tags or {})}
    if len(partitions) == 1:
        result = job.execute_in_process(
            instance=instance, partition_key=partitions[0], tags=run_tags, raise_on_error=False
        )
    else:
        run_tags.update(range_tags(partitions[0], partitions[-1]))
        result = job.execute_in_process(instance=instance, tags=run_tags, raise_on_error=False)
    outcome = RunOutcome(
        run_id=result.run_id,
        partitions=list(partitions),
        lane=lane,
        success=result.success,
        failures=[] if result.success else failure_messages(result),
        result=result,
    )
    if certify:
        outcome.decisions = certify_run(platform, result.run_id, result.success, actor="atlasmart")
    return outcome


def run_reference(defs: dg.Definitions, instance: dg.DagsterInstance) -> bool:
    return defs.resolve_job_def("reference_job").execute_in_process(instance=instance, raise_on_error=False).success
