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

**One clock per home.** A home runs on one clock, recorded in its
``clock-choice.json`` (``{"clock", "chosen_at", "by", "how"}``), and every
process that opens the home picks its clock through ``home_clock``:

- a home with a recorded choice: a process that does not ask (no ``--clock``,
  no ``$ATLASMART_CLOCK``, an empty resource ``clock``) uses it; a process
  that asks for the other clock is refused (``HomeClockRefused``, one line
  naming the home's clock and the two ways out), before it reads or writes
  anything. So a daemon started on the system clock can never measure a game
  day played on logical time, or the other way round;
- a home without one records the first clock a process asks for (a logical
  clock once its time is set: a home cannot run on a clock with no time).
  Until then a process that does not ask runs on the system clock and records
  nothing, so the everyday path (``dg dev``, ``atlasmart status`` with no
  settings) neither writes nor says anything new. A production home is
  pinned with ``atlasmart clock use system`` (or by starting its daemon with
  ``ATLASMART_CLOCK=system``). From then on a change is explicit:
  ``atlasmart clock use system|logical`` (``switch_home_clock``), recorded
  with who and when.

The file is written atomically under the home's ``clock`` lock
(``store/locks.py``), so two first processes cannot record two clocks.
"""

from __future__ import annotations

import getpass
import json
import math
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Protocol

from ..errors import UsageError
from ..settings import current
from .home import CLOCK_ENV
from .locks import home_lock

if TYPE_CHECKING:
    from .home import AtlasmartHome

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


def _write_json(path: Path, state: dict) -> None:
    """Replace ``path`` with ``state`` atomically: a reader sees the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".clock-")
    with os.fdopen(fd, "w") as handle:
        json.dump(state, handle, indent=2, sort_keys=True)
    os.replace(tmp, path)


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
        _write_json(self.path, state)

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


# -- one clock per home ----------------------------------------------------------
SYSTEM = "system"
LOGICAL = "logical"
CLOCKS = (SYSTEM, LOGICAL)
CHOICE_FILE = "clock-choice.json"
#: The home lock (``store/locks.py``) a choice is recorded under.
CLOCK_LOCK = "clock"


class HomeClockRefused(UsageError):
    """A process asked for the clock its home does not run on (nothing was read or written)."""

    def __init__(self, choice: ClockChoice, asked: str, asked_as: str):
        self.choice, self.asked = choice, asked
        super().__init__(
            f"this home runs on the {choice.clock} clock (chosen {choice.chosen_at} by {choice.by}), but this "
            f"process asks for the {asked} clock ({asked_as}); start this process with {CLOCK_ENV}={choice.clock} "
            f"(or with no clock asked for), or switch the home with `atlasmart clock use {asked}`"
        )


@dataclass(frozen=True)
class ClockChoice:
    """The clock a home runs on: when it was chosen, by whom, and how (first open, or ``atlasmart clock use``)."""

    clock: str
    chosen_at: str
    by: str
    how: str

    @classmethod
    def read(cls, home: AtlasmartHome) -> ClockChoice | None:
        """The home's recorded choice; None where none was recorded yet."""
        path = choice_file(home)
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise UsageError(f"the home's clock choice {path} is unreadable ({exc}): record it again with "
                             "`atlasmart clock use system` (or logical)") from None
        if state.get("clock") not in CLOCKS:
            raise UsageError(f"the home's clock choice {path} names no clock ({state.get('clock')!r}): record it "
                             "again with `atlasmart clock use system` (or logical)")
        return cls(state["clock"], str(state.get("chosen_at", "?")), str(state.get("by", "?")),
                   str(state.get("how", "?")))

    def to_json(self) -> dict:
        return asdict(self)

    def write(self, home: AtlasmartHome) -> None:
        _write_json(choice_file(home), self.to_json())

    def clock_of(self, home: AtlasmartHome) -> Clock:
        return LogicalClock(home.clock_file) if self.clock == LOGICAL else SystemClock()


def _chosen_now() -> str:
    return format_ts(SystemClock().now().replace(microsecond=0))


def choice_file(home: AtlasmartHome) -> Path:
    return home.root / CHOICE_FILE


def process_actor() -> str:
    """Who a process is, as a clock choice records it: user, host, pid and program."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = f"uid {os.getuid()}"
    return f"{user}@{os.uname().nodename} pid {os.getpid()} ({Path(sys.argv[0]).name or 'python'})"


def asked_clock(asked: str | None, asked_as: str = "--clock") -> tuple[str | None, str]:
    """The clock a process asks for (``asked``, else ``$ATLASMART_CLOCK``; None: it does not ask), and where."""
    source = asked_as if asked else f"${CLOCK_ENV}"
    if not asked:
        return current().clock, source  # neither system nor logical: UsageError
    mode = asked.strip().lower()
    if not mode:
        return None, source
    if mode not in CLOCKS:
        raise UsageError(f"the clock must be 'system' or 'logical', not {mode!r} (--clock or ${CLOCK_ENV})")
    return mode, source


def home_clock(home: AtlasmartHome, asked: str | None = None, asked_as: str = "--clock",
               record: bool = True) -> Clock:
    """The clock of a process that opens ``home``: the one place a process picks it (see the module docstring).

    ``asked`` is the process's explicit ask (``--clock``, the resource's
    ``clock``), ``asked_as`` how a refusal names it. ``record`` False reads
    the choice without recording one. A home without a choice: the clock
    asked for, else the system's.
    """
    wanted, source = asked_clock(asked, asked_as)
    choice = ClockChoice.read(home)
    if choice is None and record and wanted is not None and (wanted == SYSTEM or home.clock_file.exists()):
        with home_lock(home, CLOCK_LOCK):
            choice = ClockChoice.read(home)  # another process may have recorded one while this one waited
            if choice is None:
                choice = ClockChoice(wanted, _chosen_now(), process_actor(), f"first asked for ({source})")
                choice.write(home)
    if choice is None:
        return LogicalClock(home.clock_file) if wanted == LOGICAL else SystemClock()
    if wanted is not None and wanted != choice.clock:
        raise HomeClockRefused(choice, wanted, source)
    return choice.clock_of(home)


def switch_home_clock(home: AtlasmartHome, clock: str, by: str) -> tuple[ClockChoice | None, ClockChoice]:
    """Record that ``home`` runs on ``clock`` from now on (``atlasmart clock use``): the previous choice and the new."""
    if clock not in CLOCKS:
        raise UsageError(f"the clock must be 'system' or 'logical', not {clock!r}")
    if clock == LOGICAL and not home.clock_file.exists():
        raise UsageError("the logical clock is not set yet: set it first with `atlasmart clock set TIME`, then "
                         "switch the home with `atlasmart clock use logical`")
    with home_lock(home, CLOCK_LOCK):
        before = ClockChoice.read(home)
        choice = ClockChoice(clock, _chosen_now(), by, "atlasmart clock use")
        if before is None or before.clock != clock:
            choice.write(home)
        else:
            choice = before  # already so: the record keeps when and by whom it was chosen
    return before, choice
