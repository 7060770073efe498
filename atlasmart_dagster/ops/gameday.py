"""Game days: evaluate the schedule and sensors at the logical time, as the daemon would, and run what they ask.

Operators rehearse an incident without the daemon and without importing
private functions: set or advance the home's logical clock
(``atlasmart clock``), then ``atlasmart tick``. A tick fires the daily
schedule for every 08:00 UTC passed since the previous tick (the first tick
looks back one day), asks the landing manifest sensor for its requests,
executes each run in its lane, certifies it (as ``certification_sensor``
would), marks runs whose process died failed, and lets incident detection
look at the evidence. Every tick is recorded in the ledger, so ticks are
idempotent at one logical time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import dagster as dg

from ..defs.automation.schedules import scheduled_load
from ..defs.automation.sensors import plan_manifest_runs
from ..product.lanes import LANE_TAG
from ..product.slo import SCHEDULE_HOUR  # the hour of daily_sales_schedule's cron (UTC)
from ..store.clock import format_ts, parse_ts
from ..store.ledger.engine import LedgerTable, dumps
from ..store.platform import Platform
from .incidents.detection import detect
from .run_reaper import reap_dead_runs
from .runs import RunOutcome, run_chain

AUTOMATION_TICKS = LedgerTable(
    "automation_ticks",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        fired_json TEXT NOT NULL
    """,
)


@dataclass
class TickReport:
    at: str
    scheduled: list[str] = field(default_factory=list)  # partitions the schedule ran
    sensor: list[str] = field(default_factory=list)  # partitions the manifest sensor ran
    skipped: list[str] = field(default_factory=list)  # the sensor's reasons for days it did not run
    runs: list[dict] = field(default_factory=list)
    incidents: list[str] = field(default_factory=list)
    reaped_runs: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return self.__dict__


def schedule_times(previous: datetime | None, now: datetime) -> list[datetime]:
    """The 08:00 UTC ticks in (previous, now]; without a previous tick, the one of the last 24 hours."""
    start = previous if previous is not None else now - timedelta(days=1)
    first = start.replace(hour=SCHEDULE_HOUR, minute=0, second=0, microsecond=0)
    if first <= start:
        first += timedelta(days=1)
    times = []
    while first <= now:
        times.append(first)
        first += timedelta(days=1)
    return times


def _run(defs, instance, platform, request: dg.RunRequest, log_level) -> RunOutcome:
    tags = {k: v for k, v in request.tags.items() if not k.startswith("dagster/")}
    return run_chain(defs, instance, platform, [request.partition_key], lane=tags[LANE_TAG], tags=tags,
                     log_level=log_level)


def tick(defs: dg.Definitions, instance: dg.DagsterInstance, platform: Platform, log_level: str | None = None) -> TickReport:
    """One evaluation of the automation at the platform clock's now (see module docstring)."""
    now = platform.clock.now()
    report = TickReport(at=format_ts(now))
    ticks = platform.ledger.engine.select(AUTOMATION_TICKS)
    previous = parse_ts(ticks[-1]["at"]) if ticks else None
    report.reaped_runs = reap_dead_runs(instance)
    outcomes: list[RunOutcome] = []
    for when in schedule_times(previous, now):
        request = scheduled_load(platform, when)
        if isinstance(request, dg.SkipReason):  # the day's batch was loaded already
            report.skipped.append(f"schedule {format_ts(when)}: {request.skip_message}")
            continue
        outcomes.append(_run(defs, instance, platform, request, log_level))
        report.scheduled.append(request.partition_key)
    requests, skipped = plan_manifest_runs(platform)
    report.skipped += skipped
    for request in requests:
        outcomes.append(_run(defs, instance, platform, request, log_level))
        report.sensor.append(request.partition_key)
    report.runs = [
        {"run_id": o.run_id, "partitions": o.partitions, "lane": o.lane, "success": o.success,
         "certified": o.certified, "failures": o.failures}
        for o in outcomes
    ]
    report.incidents = detect(platform, instance)
    platform.ledger.engine.append(AUTOMATION_TICKS, {"at": report.at, "fired_json": dumps(report.to_json())})
    return report
