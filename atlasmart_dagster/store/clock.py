"""Clocks: the system clock in production, logical time in drills and tests.

SLO figures are differences between timestamps (ready, scheduled, run start,
run end, certified). Drills must produce exact, repeatable minutes without
waiting, so all product code asks a clock for the time instead of calling
``datetime.now()``.

The logical clock keeps its state in a small JSON file so that every process
of a drill (the drill itself, in-process Dagster runs, CLI calls) sees the same
time. Besides ``now`` it can hold *scripted phases*: the time a named phase of
a run (``run_started``, ``run_finished``) is to be stamped with. That is how a
drill says "this load took seven minutes" without taking seven minutes.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Mapping, Protocol

UTC = timezone.utc

#: Phases of a load run whose time a drill may script.
RUN_STARTED = "run_started"
RUN_FINISHED = "run_finished"


def parse_ts(value: str | datetime) -> datetime:
    """Parse an ISO timestamp (``Z`` allowed) into an aware UTC datetime."""
    if isinstance(value, datetime):
        dt = value
    else:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def format_ts(value: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``, seconds precision unless finer is present."""
    value = value.astimezone(UTC)
    text = value.isoformat(timespec="microseconds" if value.microsecond else "seconds")
    return text.replace("+00:00", "Z")


class OutsideClockRange(ValueError):
    """A logical time outside the range its caller accepts (nothing was changed)."""

    def __init__(self, value: datetime, earliest: datetime, latest: datetime):
        self.value, self.earliest, self.latest = value, earliest, latest
        super().__init__(f"logical time {format_ts(value)} is outside the accepted range {format_ts(earliest)} "
                         f"to {format_ts(latest)}")


def advanced(start: datetime, minutes: float) -> datetime:
    """``start`` moved by ``minutes``; ValueError for a non-finite number or a time off the calendar."""
    if not math.isfinite(minutes):
        raise ValueError(f"cannot move logical time by {minutes!r} minutes: not a finite number")
    try:
        return start + timedelta(minutes=minutes)
    except OverflowError:
        raise ValueError(f"moving logical time by {minutes:g} minutes leaves the calendar (years 1 to 9999)") from None


def _within(value: datetime, bounds: tuple[datetime, datetime] | None) -> datetime:
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        raise OutsideClockRange(value, *bounds)
    return value


class Clock(Protocol):
    def now(self, phase: str | None = None) -> datetime:
        """The current time; ``phase`` names the moment being stamped."""


class SystemClock:
    """Wall-clock time in UTC. Phases are ignored: production is never scripted."""

    def now(self, phase: str | None = None) -> datetime:
        return datetime.now(UTC)


@dataclass
class LogicalClock:
    """Logical time stored in a JSON file shared by every process of a drill."""

    path: Path

    def _read(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError as exc:
            raise RuntimeError(
                f"logical clock {self.path} is not set; set it with LogicalClock.set()"
            ) from exc

    def _write(self, state: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".clock-")
        with os.fdopen(fd, "w") as handle:
            json.dump(state, handle, indent=2, sort_keys=True)
        os.replace(tmp, self.path)

    def now(self, phase: str | None = None) -> datetime:
        state = self._read()
        if phase and phase in state.get("phases", {}):
            return parse_ts(state["phases"][phase])
        return parse_ts(state["now"])

    def set(
        self,
        now: str | datetime,
        phases: Mapping[str, str | datetime] | None = None,
        within: tuple[datetime, datetime] | None = None,
    ) -> None:
        """Move logical time to ``now`` and replace the scripted phases.

        ``within`` (earliest, latest) refuses a time outside it with
        ``OutsideClockRange``, before anything is written.
        """
        self._write(
            {
                "now": format_ts(_within(parse_ts(now), within)),
                "phases": {k: format_ts(parse_ts(v)) for k, v in (phases or {}).items()},
            }
        )

    def advance(self, minutes: float, within: tuple[datetime, datetime] | None = None) -> datetime:
        """Move logical time by ``minutes`` (scripted phases kept); ValueError, and nothing written, for a
        non-finite number, a time off the calendar or (``OutsideClockRange``) outside ``within``."""
        state = self._read()
        moved = _within(advanced(parse_ts(state["now"]), minutes), within)
        state["now"] = format_ts(moved)
        self._write(state)
        return moved


def minutes_between(start: datetime, end: datetime) -> float:
    """Whole or fractional minutes from ``start`` to ``end`` (negative if earlier)."""
    return round((end - start).total_seconds() / 60.0, 2)
