"""The run coordinator that puts every queued run of the chain in its lane, whoever launched it.

Lane limits are the instance's ``tag_concurrency_limits`` on ``atlasmart/lane``,
and the run queue applies them to the tags a run has when it is queued. A run
launched from a job page, the asset graph, ``dg launch``, a sensor or the
backfill daemon reaches the queue through ``DagsterInstance.submit_run``, so
this coordinator (Dagster's ``QueuedRunCoordinator``, configured as
``run_coordinator`` in the packaged ``dagster.yaml``) stamps the lane there:
``product/lanes.py`` decides it from what the run is (a backfill run, an
explicit tag, or the partitions at the AtlasMart clock's time), and the run
is queued with ``atlasmart/lane`` set. Runs that carry a lane keep it; runs of
unpartitioned jobs (golden checks, reference data) have none.

Runs executed in the launching process (``dagster asset materialize``,
``atlasmart``) never pass a coordinator; their first asset step stamps the
same tag (``defs/assets/step.py``), so Runs can be filtered by lane for every
run of the chain.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Mapping

import dagster as dg

from ...product.lanes import LANE_TAG, MANUAL, lane_of
from ...store.clock import home_clock
from ...store.home import AtlasmartHome


def lane_tags(tags: Mapping[str, str], now: datetime) -> dict[str, str]:
    """The lane tag a run should get (empty when it has one, or is not partitioned work)."""
    if LANE_TAG in tags:
        return {}
    lane = lane_of(tags, now)
    return {} if lane == MANUAL else {LANE_TAG: lane}


def atlasmart_now() -> datetime:
    """The AtlasMart clock's time: the home's clock (``store/clock.py``), as a run of this process would use it.

    The choice is read, never recorded, and the stores are not opened (the
    webserver of a team deployment need not have a home); a clock that is
    refused or unreadable falls back to the system time rather than refuse
    the run (the run's own resource then refuses a wrong clock).
    """
    try:
        return home_clock(AtlasmartHome.resolve(), record=False).now()
    except Exception:  # noqa: BLE001 - never refuse a run because the clock is unreadable
        return datetime.now(timezone.utc)


class LaneRunCoordinator(dg.QueuedRunCoordinator):
    """``QueuedRunCoordinator`` that tags each run with its ``atlasmart/lane`` before queueing it."""

    def submit_run(self, context: dg.SubmitRunContext) -> dg.DagsterRun:
        run = context.dagster_run
        tags = lane_tags(run.tags, atlasmart_now())
        if tags:
            self._instance.add_run_tags(run.run_id, tags)
        return super().submit_run(context)
