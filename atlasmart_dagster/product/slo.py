"""Partition-aware service level objectives, measured per business day.

Dagster's FreshnessPolicy looks only at the newest materialization of any
partition, so backfilling an old day can make a late asset look fresh. We
measure every partition against its own timeline instead:

============  ==============================  ==========
objective     measured                        target
============  ==============================  ==========
freshness     manifest ready_at -> certified  <= 30 min
completeness  (accepted + quarantined) / manifest rows   100 %
duration      run start -> run end            <= 10 min
availability  schedule (D+1 08:00) -> certified  <= 30 min
============  ==============================  ==========

SLOs describe daily delivery, so they are evaluated when a partition is first
certified by a current-lane run (or a manual run of the current day).
Backfill-lane certifications repair history and are not SLO events. Results
go to the ledger with minutes, target, met/missed and by how much; a missed
objective says by how many minutes (or points) it was missed.

A day the daily delivery tried and failed to certify by its deadline has
missed availability even though nothing was delivered: ``record_undelivered``
records that miss (incident detection calls it once the deadline passed), and
the day's first delivery is still measured and recorded when it comes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..store.clock import format_ts, minutes_between, parse_ts
from ..store.ledger import Ledger
from ..store.ledger.day_states import DayStates
from ..store.tables import CERTIFIED_ASSETS

SCHEDULE_HOUR = 8
AVAILABILITY_MINUTES = 30
# A source still not ready this long after the schedule is late (an incident),
# not merely "a few minutes behind" as on a healthy day (ready 08:04).
SOURCE_LATE_GRACE = timedelta(minutes=10)

FRESHNESS = "freshness"
COMPLETENESS = "completeness"
DURATION = "duration"
AVAILABILITY = "availability"
OBJECTIVES = (FRESHNESS, COMPLETENESS, DURATION, AVAILABILITY)
TARGETS = {FRESHNESS: 30.0, COMPLETENESS: 100.0, DURATION: 10.0, AVAILABILITY: 30.0}
UNITS = {FRESHNESS: "min", COMPLETENESS: "%", DURATION: "min", AVAILABILITY: "min"}


def scheduled_at(partition: str) -> datetime:
    """When the daily schedule fires for ``partition``: D+1 08:00 UTC."""
    return parse_ts(f"{partition}T{SCHEDULE_HOUR:02d}:00:00Z") + timedelta(days=1)


def due_at(partition: str) -> datetime:
    """When consumers expect the partition certified (the availability deadline)."""
    return scheduled_at(partition) + timedelta(minutes=AVAILABILITY_MINUTES)


@dataclass(frozen=True)
class SloResult:
    partition: str
    objective: str
    value: float | None
    target: float
    met: bool
    missed_by: float | None
    detail: str

    @property
    def unit(self) -> str:
        return UNITS[self.objective]

    @property
    def value_text(self) -> str:
        return "n/a" if self.value is None else f"{_num(self.value)} {self.unit}"

    def describe(self) -> str:
        value = self.value_text
        bound = ">=" if self.objective == COMPLETENESS else "<="
        verdict = "met" if self.met else (
            f"MISSED by {_num(self.missed_by)} {self.unit}" if self.missed_by is not None else "MISSED"
        )
        return f"{self.objective} {value} (target {bound} {_num(self.target)} {self.unit}): {verdict}"

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "objective": self.objective,
            "value": self.value,
            "unit": self.unit,
            "target": self.target,
            "met": self.met,
            "missed_by": self.missed_by,
            "detail": self.detail,
        }


def _num(value: float | None) -> str:
    if value is None:
        return "n/a"
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}".rstrip("0").rstrip(".")


def _upper(partition: str, objective: str, value: float | None, detail: str) -> SloResult:
    target = TARGETS[objective]
    if value is None:
        return SloResult(partition, objective, None, target, False, None, detail)
    met = value <= target
    return SloResult(partition, objective, value, target, met, None if met else round(value - target, 2), detail)


@dataclass(frozen=True)
class Timeline:
    """The moments an SLO evaluation of one partition needs."""

    partition: str
    ready_at: datetime | None
    scheduled_at: datetime
    run_started_at: datetime | None
    run_finished_at: datetime | None
    certified_at: datetime
    manifest_rows: int | None
    staged_rows: int | None

    def to_json(self) -> dict[str, Any]:
        def ts(v):
            return format_ts(v) if v else None

        return {
            "partition": self.partition,
            "ready_at": ts(self.ready_at),
            "scheduled_at": ts(self.scheduled_at),
            "run_started_at": ts(self.run_started_at),
            "run_finished_at": ts(self.run_finished_at),
            "certified_at": ts(self.certified_at),
            "manifest_rows": self.manifest_rows,
            "staged_rows": self.staged_rows,
        }


def timeline_for(ledger: Ledger, partition: str, run_id: str, certified_at: datetime,
                 states: DayStates | None = None) -> Timeline:
    phases = ledger.runs.phases(run_id=run_id, partition=partition)
    started = [parse_ts(p["at"]) for p in phases if p["phase"] == "run_started"]
    finished = [parse_ts(p["at"]) for p in phases if p["phase"] == "run_finished"]
    states = states if states is not None else ledger.partitions.states([partition])
    raw_built = [e for e in states.get("raw_order_lines", partition).builds if e.run_id == run_id]
    batch_ids = set(raw_built[-1].detail.get("batch_ids", [])) if raw_built else set()
    batches = [b for b in ledger.batches.list(partition) if not batch_ids or b["batch_id"] in batch_ids]
    staged = states.get("stg_order_lines", partition).builds
    staged_detail = staged[-1].detail if staged else {}
    return Timeline(
        partition=partition,
        ready_at=max((parse_ts(b["ready_at"]) for b in batches), default=None),
        scheduled_at=scheduled_at(partition),
        run_started_at=min(started) if started else None,
        run_finished_at=max(finished) if finished else None,
        certified_at=certified_at,
        manifest_rows=staged_detail.get("manifest_rows"),
        staged_rows=(staged_detail["accepted"] + staged_detail["quarantined"]) if staged_detail else None,
    )


def evaluate(t: Timeline) -> list[SloResult]:
    p = t.partition
    results = [
        _upper(p, FRESHNESS, minutes_between(t.ready_at, t.certified_at) if t.ready_at else None,
               f"ready {format_ts(t.ready_at) if t.ready_at else 'unknown'} -> certified {format_ts(t.certified_at)}"),
    ]
    if t.manifest_rows:
        pct = round(100.0 * (t.staged_rows or 0) / t.manifest_rows, 2)
        met = t.staged_rows == t.manifest_rows
        results.append(SloResult(p, COMPLETENESS, pct, TARGETS[COMPLETENESS], met, None if met else round(100.0 - pct, 2),
                                 f"{t.staged_rows} of {t.manifest_rows} manifest rows accepted or quarantined"))
    else:
        results.append(SloResult(p, COMPLETENESS, None, TARGETS[COMPLETENESS], False, None, "manifest rows unknown"))
    duration = (
        minutes_between(t.run_started_at, t.run_finished_at) if t.run_started_at and t.run_finished_at else None
    )
    results.append(_upper(p, DURATION, duration, "run start -> run end"))
    results.append(_availability(t))
    return results


def _availability(t: Timeline) -> SloResult:
    """Minutes from the schedule to certification; a day certified before its schedule waited 0 minutes.

    A negative figure ("availability -21.95 min") reads as a fault; the day
    was simply early, which the detail says.
    """
    waited = minutes_between(t.scheduled_at, t.certified_at)
    span = f"scheduled {format_ts(t.scheduled_at)} -> certified {format_ts(t.certified_at)}"
    if waited < 0:
        return _upper(t.partition, AVAILABILITY, 0.0, f"{span} ({_num(round(-waited, 2))} min before the schedule)")
    return _upper(t.partition, AVAILABILITY, waited, span)


def attempted_on_time(ledger: Ledger, partition: str, states: DayStates | None = None) -> bool:
    """Did a current-lane run try to deliver this day (even if it was blocked or failed)?"""
    states = states if states is not None else ledger.partitions.states([partition], ["raw_order_lines"])
    return any(p["lane"] == "current" for p in ledger.runs.phases(partition=partition)) or any(
        e.lane == "current" for e in states.get("raw_order_lines", partition).history
    )


def _certified_before(states: DayStates, partition: str, run_id: str) -> bool:
    """Was the day certified by a run other than ``run_id`` (its first delivery was earlier)?"""
    return any(e.run_id != run_id for asset in CERTIFIED_ASSETS for e in states.get(asset, partition).certifications)


def _delivered(records: list[dict[str, Any]]) -> bool:
    """Was a delivery measured? (An undelivered-availability miss has no run.)"""
    return any(r["run_id"] for r in records)


def record_first_delivery(ledger: Ledger, partition: str, run_id: str, lane: str | None, certified_at: datetime,
                          states: DayStates | None = None) -> list[SloResult]:
    """Evaluate and record the SLOs of a partition's first delivery; [] if not an SLO event.

    A day is an SLO event when it is first certified and either that build ran
    in the current lane or a current-lane run had tried to deliver it (a day
    that failed on time and was repaired in the backfill lane still owes its
    consumers the figures). Days only ever loaded as history are not. An
    availability miss recorded while the day was undelivered does not count
    as a delivery: the late delivery is still measured.

    ``states``: the caller's read of the ledger's days, holding this one (read here when None).
    """
    if _delivered(ledger.slos.records(partition)):
        return []
    if states is None:
        states = ledger.partitions.states([partition])  # one read of the day for the whole measurement
    if lane == "backfill" and not attempted_on_time(ledger, partition, states):
        return []
    if _certified_before(states, partition, run_id):
        # A reload of a day consumers already had (history loaded by a backfill, then
        # rerun from the job page) is not its delivery: measuring it would report a
        # miss of weeks and open an incident for a day that was never late.
        return []
    timeline = timeline_for(ledger, partition, run_id, certified_at, states)
    results = evaluate(timeline)
    for result in results:
        ledger.slos.record(result, run_id, timeline.to_json(), certified_at)
    return results


def record_undelivered(ledger: Ledger, partition: str, now: datetime) -> SloResult | None:
    """Record the availability miss of a day the daily delivery owes but has not certified by its deadline.

    Returns the recorded miss, or None when there is nothing to record: the
    deadline has not passed, the day was never attempted on time (history),
    it is certified, or an SLO of the day is already recorded (delivered, or
    already missed).
    The value is the minutes from the schedule to ``now``, so the miss says
    how late the day already is.
    """
    if now < due_at(partition) or ledger.slos.records(partition):
        return None
    states = ledger.partitions.states([partition])
    if not attempted_on_time(ledger, partition, states):
        return None
    if states.all_served(CERTIFIED_ASSETS, partition):
        return None  # delivered; its first delivery was measured (or it is history)
    waited = minutes_between(scheduled_at(partition), now)
    result = SloResult(partition, AVAILABILITY, waited, TARGETS[AVAILABILITY], False,
                       round(waited - TARGETS[AVAILABILITY], 2),
                       f"not certified by the deadline {format_ts(due_at(partition))} (still undelivered at {format_ts(now)})")
    timeline = {"partition": partition, "scheduled_at": format_ts(scheduled_at(partition)),
                "due_at": format_ts(due_at(partition)), "undelivered_at": format_ts(now)}
    ledger.slos.record(result, None, timeline, now)
    return result


def due_state(partition: str, now: datetime, certified: bool) -> dict[str, Any]:
    """Where a day stands against its deadline at ``now``: certified, not due yet, or overdue."""
    deadline = due_at(partition)
    if certified:
        state, minutes = "certified", None
        detail = f"due {format_ts(deadline)}; certified"
    elif now < deadline:
        state = "not due yet"
        minutes = minutes_between(now, deadline)
        detail = f"due {format_ts(deadline)}, in {_num(minutes)} min"
    else:
        state = "overdue"
        minutes = minutes_between(deadline, now)
        detail = f"was due {format_ts(deadline)}; not certified {_num(minutes)} min later"
    return {"partition": partition, "state": state, "due_at": format_ts(deadline), "minutes": minutes,
            "detail": detail}


def latest_results(ledger: Ledger, partition: str) -> list[SloResult]:
    """The recorded SLO results of a partition (empty when it has none)."""
    latest: dict[str, dict] = {}
    for row in ledger.slos.records(partition):
        latest[row["objective"]] = row
    return [
        SloResult(partition, r["objective"], r["value"], r["target"], r["met"], r["missed_by"], r["detail"] or "")
        for r in (latest[o] for o in OBJECTIVES if o in latest)
    ]
