"""Game-day commands: the home's logical clock, and one tick of the automation at its time.

    atlasmart --clock logical clock set 2026-09-22T08:00:00Z
    atlasmart --clock logical tick          # the schedule and sensors, as the daemon would
    atlasmart --clock logical clock advance 30
    atlasmart --clock logical tick
"""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..store.clock import LogicalClock, OutsideClockRange, SystemClock, format_ts, parse_ts
from ..store.home import AtlasmartHome
from .context import CliContext
from .output import print_json, table


def cmd_clock(args: argparse.Namespace, ctx: CliContext) -> int:
    """Show, set or advance the home's logical clock (used with --clock logical or ATLASMART_CLOCK=logical)."""
    from ..ops.gameday import accepted_clock_range  # local: loads Dagster's partitions (cold start)

    # The home alone, not ctx.platform: that refuses a logical clock that is not
    # set yet, and setting it is what this command is for.
    clock = LogicalClock(AtlasmartHome.resolve(ctx.home).ensure().clock_file)
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
    elif args.action == "advance":
        try:
            minutes = float(args.value or "")
        except ValueError:
            raise UsageError(f"clock advance needs minutes (e.g. 30), not {args.value!r}") from None
        if not clock.path.exists():
            raise UsageError("the logical clock is not set yet: atlasmart clock set TIME")
        _refusing_outside(accepted, clock.advance, minutes, within=accepted)
    elif not clock.path.exists():
        raise UsageError("the logical clock is not set yet: atlasmart clock set TIME")
    now = clock.now()
    if ctx.as_json:
        print_json({"now": format_ts(now), "file": str(clock.path),
                    "accepted": {"from": format_ts(accepted[0]), "to": format_ts(accepted[1])}})
    else:
        print(f"logical time {format_ts(now)} ({clock.path}); commands use it with --clock logical")
        if not accepted[0] <= now <= accepted[1]:  # written before ranges were checked, or by a drill
            print(f"  outside the accepted range {format_ts(accepted[0])} to {format_ts(accepted[1])}: tick skips "
                  "the mornings outside the partitions; set it again with `atlasmart clock set TIME`")
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
    p.add_argument("action", choices=["show", "set", "advance"])
    p.add_argument("value", nargs="?", help="set: an ISO time; advance: minutes")
    p.set_defaults(handler=cmd_clock)
    p = sub.add_parser("tick", help=cmd_tick.__doc__, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(handler=cmd_tick)
