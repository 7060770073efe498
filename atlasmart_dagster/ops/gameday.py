"""Game days: evaluate the schedule and sensors at the logical time, as the daemon would, and run what they ask.

Operators rehearse an incident without the daemon and without importing
private functions: set or advance the home's logical clock
(``atlasmart clock``), then ``atlasmart tick``. A tick fires the daily
schedule for every 08:00 UTC passed since the previous tick (the first tick
looks back one day; a morning whose day is not a partition is skipped with
its reason, and a tick recorded at a later logical time than now, because the
clock was set back, does not count), asks the landing manifest sensor for its requests,
executes each run in its lane, certifies it (as ``certification_sensor``
would), marks runs whose process died failed, and lets incident detection
look at the evidence. Every tick is recorded in the ledger, so ticks are
idempotent at one logical time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time

import dagster as dg

from ..defs.automation.load_retries import given_up_loads
from ..defs.automation.schedules import daily_sales_schedule, scheduled_load
from ..defs.automation.sensors import landing_manifest_sensor, plan_manifest_runs
from ..defs.partitions import FIRST_SALES_DATE, LAST_SALES_DATE, daily_partitions, partitions_span
from ..product.lanes import LANE_TAG
from ..product.slo import SCHEDULE_HOUR  # the hour of daily_sales_schedule's cron (UTC)
from ..store.clock import UTC, format_ts, parse_ts
from ..store.ledger.engine import LedgerTable, dumps
from ..store.platform import Platform
from .response.incidents.detection import detect, route
from ..store.ledger.incidents import IncidentStore
from ..defs.automation.run_reaper import reap_dead_runs
from .runs.chains import RunOutcome, run_chain

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


def accepted_clock_range(system_now: datetime) -> tuple[datetime, datetime]:
    """The logical times ``atlasmart clock`` accepts: from the start of the first partition to the system clock's now.

    Dagster's partitions are the days that have ended by the system clock, so a
    logical time later than that could only skip every morning.
    """
    return parse_ts(f"{FIRST_SALES_DATE}T00:00:00Z"), system_now.replace(microsecond=0)


@dataclass(frozen=True)
class Mornings:
    """The schedule's 08:00 UTC ticks in (previous, now]: those whose day is a partition, and why others are not run."""

    in_range: list[datetime]
    skipped: list[str]


def schedule_times(previous: datetime | None, now: datetime) -> Mornings:
    """The 08:00 UTC ticks in (previous, now] (without a previous tick, the one of the last 24 hours).

    A morning loads the day before it; mornings whose day is not a partition
    (before the first, or not ended yet by the system clock) are skipped, each
    run of them with one reason, so a clock once set outside the partitions
    never fails a tick and the tick after it runs the mornings in range. Dates
    are counted as ordinals, so a clock near the end of the calendar never
    overflows.
    """
    if previous is None:
        start = now.date().toordinal() - 1, now.time()
    else:
        start = previous.date().toordinal(), previous.time()
    morning = time(SCHEDULE_HOUR)
    first = max(1, start[0] + (1 if start[1] >= morning else 0))  # the first 08:00 strictly after ``start``
    last = now.date().toordinal() - (0 if now.time() >= morning else 1)  # the last 08:00 at or before now
    low = date.fromisoformat(FIRST_SALES_DATE).toordinal() + 1  # the morning of the day after the first partition
    newest = daily_partitions.get_last_partition_key()  # by the system clock, or $ATLASMART_LAST_SALES_DATE
    high = date.fromisoformat(newest).toordinal() + 1 if newest else low - 1
    skipped = []
    if first <= min(last, low - 1):
        skipped.append(_skipped_mornings(first, min(last, low - 1),
                                         f"they load days before the first partition {FIRST_SALES_DATE}"))
    if max(first, high + 1) <= last:
        why = f"their days are not partitions{'' if LAST_SALES_DATE else ' yet'} (partitions are {partitions_span()})"
        skipped.append(_skipped_mornings(max(first, high + 1), last, why))
    days = range(max(first, low), min(last, high) + 1)
    in_range = [datetime.combine(date.fromordinal(d), morning, UTC) for d in days]
    return Mornings(in_range, skipped)


def _skipped_mornings(first: int, last: int, why: str) -> str:
    def text(ordinal: int) -> str:
        return f"{date.fromordinal(ordinal).isoformat()}T{SCHEDULE_HOUR:02d}:00:00Z"

    count = last - first + 1
    span = text(first) if count == 1 else f"{count} mornings from {text(first)} to {text(last)}"
    return f"schedule {span}: skipped, {why}"


def previous_tick(platform: Platform, now: datetime) -> datetime | None:
    """The latest tick at or before ``now``; ticks recorded at a later logical time (the clock was set back) do not
    count."""
    times = [parse_ts(t["at"]) for t in platform.ledger.engine.select(AUTOMATION_TICKS)]
    earlier = [t for t in times if t <= now]
    return max(earlier) if earlier else None


def record_given_up(platform: Platform, instance: dg.DagsterInstance) -> list[str]:
    """Say on the day's incident that automation gave up loading a batch; the incidents opened or updated."""
    store = IncidentStore(platform.ledger)
    touched = []
    for load in given_up_loads(instance, platform):
        signal = {"key": f"load_gave_up:{load.partition}:{load.batch_id}", "kind": "run_failed",
                  "partition": load.partition, "run_id": load.last_run_id, "job": load.last_job,
                  "detail": load.reason}
        incident_id = route(store, signal, platform.clock.now(), actor="landing_manifest_sensor")
        if incident_id:
            touched.append(incident_id)
    return touched


# The tags the daemon puts on the runs a schedule or sensor starts. Dagster's UI
# reads the names (its CreatedByTag: dagster/user, dagster/schedule_name,
# dagster/sensor_name, else "Manually launched"), so a tick's runs say which
# automation started them, as the daemon's would; the run key and the
# schedule's execution time say which evaluation, and TICK_TAG which
# ``atlasmart tick`` (its logical time, as the ledger's automation_ticks row).
SCHEDULE_NAME_TAG = "dagster/schedule_name"
SENSOR_NAME_TAG = "dagster/sensor_name"
SCHEDULED_EXECUTION_TIME_TAG = "dagster/scheduled_execution_time"
RUN_KEY_TAG = "dagster/run_key"
TICK_TAG = "atlasmart/tick"


def schedule_origin(when: datetime, tick_at: str) -> dict[str, str]:
    """The tags of a run the schedule's morning ``when`` started in the tick at ``tick_at``."""
    return {SCHEDULE_NAME_TAG: daily_sales_schedule.name, SCHEDULED_EXECUTION_TIME_TAG: when.isoformat(),
            TICK_TAG: tick_at}


def sensor_origin(tick_at: str) -> dict[str, str]:
    """The tags of a run the landing manifest sensor asked for in the tick at ``tick_at``."""
    return {SENSOR_NAME_TAG: landing_manifest_sensor.name, TICK_TAG: tick_at}


def _run(defs, instance, platform, request: dg.RunRequest, log_level, origin: dict[str, str]) -> RunOutcome:
    tags = {k: v for k, v in request.tags.items() if not k.startswith("dagster/")}
    if request.run_key:
        tags[RUN_KEY_TAG] = request.run_key
    return run_chain(defs, instance, platform, [request.partition_key], lane=tags[LANE_TAG],
                     tags={**tags, **origin}, log_level=log_level)


def tick(defs: dg.Definitions, instance: dg.DagsterInstance, platform: Platform, log_level: str | None = None) -> TickReport:
    """One evaluation of the automation at the platform clock's now (see module docstring)."""
    now = platform.clock.now()
    report = TickReport(at=format_ts(now))
    previous = previous_tick(platform, now)
    report.reaped_runs = reap_dead_runs(instance)
    outcomes: list[RunOutcome] = []
    mornings = schedule_times(previous, now)
    report.skipped += mornings.skipped
    for when in mornings.in_range:
        request = scheduled_load(platform, when, instance)
        if isinstance(request, dg.SkipReason):  # the day's batch was loaded already
            report.skipped.append(f"schedule {format_ts(when)}: {request.skip_message}")
            continue
        outcomes.append(_run(defs, instance, platform, request, log_level, schedule_origin(when, report.at)))
        report.scheduled.append(request.partition_key)
    requests, skipped = plan_manifest_runs(platform, instance)
    report.skipped += skipped
    for request in requests:
        outcomes.append(_run(defs, instance, platform, request, log_level, sensor_origin(report.at)))
        report.sensor.append(request.partition_key)
    report.runs = [
        {"run_id": o.run_id, "partitions": o.partitions, "lane": o.lane, "success": o.success,
         "certified": o.certified, "failures": o.failures}
        for o in outcomes
    ]
    report.incidents = detect(platform, instance)
    for incident_id in record_given_up(platform, instance):
        if incident_id not in report.incidents:
            report.incidents.append(incident_id)
    platform.ledger.engine.append(AUTOMATION_TICKS, {"at": report.at, "fired_json": dumps(report.to_json())})
    return report
