"""Game-day commands: the home's clock and logical time, and one tick of the automation at its time.

A home runs on one clock (``store/clock.py``); ``clock show`` says which, and
``clock use`` switches it (a daemon or UI started without a clock follows).

    atlasmart --clock logical clock set 2026-09-22T08:00:00Z   # a new home: records the logical clock
    atlasmart --clock logical tick          # the schedule and sensors, as the daemon would
    atlasmart --clock logical clock advance 30
    atlasmart --clock logical tick
"""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..store.clock import (
    CLOCKS,
    LOGICAL,
    SYSTEM,
    ClockChoice,
    LogicalClock,
    OutsideClockRange,
    SystemClock,
    asked_clock,
    format_ts,
    home_clock,
    parse_ts,
    process_actor,
    switch_home_clock,
)
from ..store.home import CLOCK_ENV, AtlasmartHome
from .context import CliContext
from .output import print_json, table


def cmd_clock(args: argparse.Namespace, ctx: CliContext) -> int:
    """Show the home's clock (one per home) and logical time; set or advance logical time; switch the home's clock
    (use system|logical)."""
    from ..ops.gameday import accepted_clock_range  # local: loads Dagster's partitions (cold start)

    # The home alone, not ctx.platform: that refuses a logical clock that is not
    # set yet, and setting it is what this command is for.
    home = AtlasmartHome.resolve(ctx.home).ensure()
    if args.action == "use":
        return _use_clock(args, ctx, home)
    home_clock(home, ctx.clock)  # refuses a process asking for the other clock, before anything is changed
    clock = LogicalClock(home.clock_file)
    accepted = accepted_clock_range(SystemClock().now())
    if args.action == "set":
        if not args.value:
            raise UsageError("clock set needs a time, e.g. 2026-09-22T08:00:00Z")
        try:
            when = parse_ts(args.value)
        except ValueError:
            raise UsageError(f"{args.value!r} is not an ISO timestamp such as 2026-09-22T08:00:00Z") from None
        except OverflowError:
            raise UsageError(f"{args.value!r} lies beyond the calendar once put in UTC") from None
        _refusing_outside(accepted, clock.set, when, within=accepted)
        home_clock(home, ctx.clock)  # a logical clock asked for is recorded once its time is set
    elif args.action == "advance":
        try:
            minutes = float(args.value or "")
        except ValueError:
            raise UsageError(f"clock advance needs minutes (e.g. 30), not {args.value!r}") from None
        if not clock.path.exists():
            raise UsageError("the logical clock is not set yet: atlasmart clock set TIME")
        _refusing_outside(accepted, clock.advance, minutes, within=accepted)
    elif not clock.path.exists() and asked_clock(ctx.clock)[0] == LOGICAL:
        raise UsageError("the logical clock is not set yet: atlasmart clock set TIME")
    choice = ClockChoice.read(home)
    runs_on = choice.clock if choice else SYSTEM
    now = clock.now() if clock.path.exists() else None
    if ctx.as_json:
        print_json({"now": format_ts(now) if now else None, "file": str(clock.path),
                    "accepted": {"from": format_ts(accepted[0]), "to": format_ts(accepted[1])},
                    "home_clock": runs_on, "chosen": choice.to_json() if choice else None})
        return 0
    if choice is None:
        print(f"the home runs on the {SYSTEM} clock (none recorded: the first clock a process asks for is); "
              f"record it with `atlasmart clock use {SYSTEM}|{LOGICAL}`")
    else:
        print(f"the home runs on the {choice.clock} clock (chosen {choice.chosen_at} by {choice.by}, "
              f"{choice.how}); switch it with `atlasmart clock use {SYSTEM if choice.clock == LOGICAL else LOGICAL}`")
    if now is None:
        print(f"logical time not set ({clock.path}): atlasmart clock set TIME")
        return 0
    print(f"logical time {format_ts(now)} ({clock.path})")
    if not accepted[0] <= now <= accepted[1]:  # written before ranges were checked, or by a drill
        print(f"  outside the accepted range {format_ts(accepted[0])} to {format_ts(accepted[1])}: tick skips "
              "the mornings outside the partitions; set it again with `atlasmart clock set TIME`")
    return 0


def _use_clock(args: argparse.Namespace, ctx: CliContext, home: AtlasmartHome) -> int:
    """``clock use``: record the home's clock (the process's own ask does not matter: this is the switch)."""
    if args.value not in CLOCKS:
        raise UsageError(f"clock use needs {SYSTEM} or {LOGICAL}, not {args.value!r}")
    before, choice = switch_home_clock(home, args.value, args.by or process_actor())
    asked, source = asked_clock(ctx.clock)
    if ctx.as_json:
        print_json({"home_clock": choice.clock, "chosen": choice.to_json(),
                    "previous": before.to_json() if before else None})
        return 0
    was = f"was {before.clock} since {before.chosen_at}" if before else "none was recorded"
    if before is not None and before.clock == choice.clock:
        print(f"the home runs on the {choice.clock} clock already (chosen {choice.chosen_at} by {choice.by})")
    else:
        print(f"the home runs on the {choice.clock} clock from now on ({was}); processes asking for the other "
              f"clock are refused: restart the daemon and the UI with {CLOCK_ENV}={choice.clock} or without it")
    if asked is not None and asked != choice.clock:
        print(f"  this shell still asks for the {asked} clock ({source}): unset it or set it to {choice.clock}")
    return 0


def _refusing_outside(accepted, change, *args, **kwargs) -> None:
    """Apply a change of the logical clock; a time outside ``accepted`` (or no time at all) is a usage error."""
    try:
        change(*args, **kwargs)
    except ValueError as exc:  # OutsideClockRange, a non-finite number, a time off the calendar
        reason = str(exc) if isinstance(exc, OutsideClockRange) else (
            f"{exc}; the accepted range is {format_ts(accepted[0])} to {format_ts(accepted[1])}")
        raise UsageError(
            f"{reason} (from the start of the first partition to the system clock's now: a day becomes a partition "
            "once it has ended); the clock was not changed"
        ) from None


def cmd_tick(args: argparse.Namespace, ctx: CliContext) -> int:
    """Evaluate the schedule and sensors at the clock's now, as the daemon would; run and certify what they ask."""
    from ..ops.gameday import tick  # lazy: loaded by its command only

    report = tick(ctx.defs, ctx.instance, ctx.platform, ctx.log_level)
    if ctx.as_json:
        print_json(report.to_json())
    else:
        print(f"tick at {report.at}: schedule ran {', '.join(report.scheduled) or 'nothing'}; "
              f"manifest sensor ran {', '.join(report.sensor) or 'nothing'}")
        if report.runs:
            print(table(["run", "sales_date", "lane", "success", "certified", "failures"],
                        [[r["run_id"][:8], ",".join(r["partitions"]), r["lane"], r["success"],
                          ",".join(r["certified"]) or "-", "; ".join(r["failures"])[:100]] for r in report.runs]))
        for reason in report.skipped:
            print(f"  not run: {reason}")
        if report.reaped_runs:
            print(f"  marked failed (process gone): {', '.join(report.reaped_runs)}")
        print(f"incidents opened or updated: {', '.join(report.incidents) or 'none'}")
    return 0 if all(r["success"] for r in report.runs) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("clock", help=cmd_clock.__doc__, description=cmd_clock.__doc__)
    p.add_argument("action", choices=["show", "set", "advance", "use"])
    p.add_argument("value", nargs="?", help="set: an ISO time; advance: minutes; use: system or logical")
    p.add_argument("--by", help="use: who switches the home's clock (recorded; default: this user, host and pid)")
    p.set_defaults(handler=cmd_clock)
    p = sub.add_parser("tick", help=cmd_tick.__doc__, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(handler=cmd_tick)
