"""atlasmart: operate the AtlasMart daily sales data product from a shell.

Every command works on one AtlasMart home (--home, else $ATLASMART_HOME, else
./.atlasmart) and prints JSON with --json. Runs are real Dagster runs,
in-process, recorded in the Dagster instance at $DAGSTER_HOME (else
<home>/dagster, prepared with the project's dagster.yaml), so the UI shows them.

Examples:
  atlasmart demo                      load the bundled sample, certify, print controls
  atlasmart status --json             consumer-visible state per partition
  atlasmart controls --asset fact_sales --partition 2026-09-20
  DAGSTER_HOME=$(atlasmart dagster-home) dagster dev -w workspace.yaml

Errors: a mistake in the arguments or the setting (a bad date, a home that is
not a folder) or a refused or damaged operation prints one line on stderr
saying what is wrong and what to do, never a traceback; --debug shows it.
Exit codes:
  0    done
  1    refused or failed (a run failed, certification refused, a damaged
       store, an unexpected error: run again with --debug for the traceback)
  2    usage: wrong arguments or setting; nothing was done
  130  interrupted (Ctrl-C)
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys
import traceback
from contextlib import contextmanager
from typing import Iterator

import dagster as dg

from ..defs.partitions import FIRST_SALES_DATE
from ..errors import AtlasmartError, UsageError
from . import (
    access,
    batches,
    bench,
    demo,
    drills,
    gameday,
    incidents,
    inspecting,
    migrate,
    observability,
    operations,
    recovery,
)
from .context import CliContext

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

COMMAND_MODULES = [
    demo, inspecting, operations, batches, gameday, incidents, recovery, migrate, access, observability, drills, bench,
]


def cmd_dagster_home(args: argparse.Namespace, ctx: CliContext) -> int:
    """Print the DAGSTER_HOME prepared for this AtlasMart home (with the project's dagster.yaml)."""
    from ..store.dagster_instance import prepare_dagster_home  # lazy: loaded by its command only

    print(prepare_dagster_home(ctx.platform.home))
    return 0


def _common_options(defaults: bool) -> argparse.ArgumentParser:
    """The options every command takes, before or after the command name.

    The copy attached to each command uses SUPPRESS defaults so that an option
    given before the command is not reset by the command's own parser.
    """
    keep = {} if defaults else {"default": argparse.SUPPRESS}
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="AtlasMart home folder (default $ATLASMART_HOME or ./.atlasmart)", **keep)
    common.add_argument(
        "--landing", help="ERP landing zone (default $ATLASMART_LANDING or the bundled sample)", **keep
    )
    common.add_argument(
        "--clock", choices=["system", "logical"], help="time source (default $ATLASMART_CLOCK or system)", **keep
    )
    common.add_argument("--json", action="store_true", help="print JSON for scripts", **keep)
    common.add_argument("--debug", action="store_true", help="show the traceback of an error", **keep)
    common.add_argument(
        "--dagster-log-level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        help="what Dagster's console logger prints while runs execute (default CRITICAL: only the summary)",
        **({"default": "CRITICAL"} if defaults else keep),
    )
    common.add_argument(
        "--ephemeral-instance",
        action="store_true",
        help="run Dagster in memory: faster, but the runs are not recorded for the UI",
        **keep,
    )
    return common


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (what is wrong, where the help is), exit 2."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="atlasmart",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_common_options(defaults=True)],
    )
    # Every command also accepts the common options after its name
    # (``atlasmart status --json``), through the public ``parser_class`` hook.
    per_command = _common_options(defaults=False)
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        parser_class=functools.partial(Parser, parents=[per_command]),
    )
    for module in COMMAND_MODULES:
        module.register(sub)
    p = sub.add_parser("dagster-home", help=cmd_dagster_home.__doc__, description=cmd_dagster_home.__doc__)
    p.set_defaults(handler=cmd_dagster_home)
    return parser


def explain(exc: Exception) -> tuple[int, str]:
    """The exit code and the one line to print for an exception that ended a command."""
    if isinstance(exc, UsageError):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, AtlasmartError):
        return EXIT_FAILED, str(exc)
    if isinstance(exc, dg.DagsterUnknownPartitionError):
        return EXIT_USAGE, f"{exc} (partitions are the days from {FIRST_SALES_DATE} to yesterday, UTC)"
    return EXIT_FAILED, f"unexpected {type(exc).__name__}: {exc}; run again with --debug for the traceback"


@contextmanager
def _noticing_interrupts() -> Iterator[list[int]]:
    """Note a Ctrl-C even when a library turns it into its own error (DuckDB raises RuntimeError)."""
    noticed: list[int] = []
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield noticed  # ignored (a background job) or handled by the caller: leave it so
        return

    def notice(signum, frame):
        noticed.append(signum)
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, notice)
    try:
        yield noticed
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    """Run one command; the one place where errors become a line on stderr and an exit code."""
    # Behave like a Unix tool when piped into head: exit quietly.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = build_parser().parse_args(argv)  # argument errors exit 2 here, with one line
    ctx = CliContext(
        home=args.home,
        landing=args.landing,
        clock=args.clock,
        as_json=args.json,
        ephemeral_instance=args.ephemeral_instance,
        log_level=args.dagster_log_level,
    )
    with _noticing_interrupts() as interrupted:
        try:
            return args.handler(args, ctx)
        except KeyboardInterrupt:
            if args.debug:
                traceback.print_exc()
            print("atlasmart: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except Exception as exc:
            if args.debug:
                raise
            if interrupted:
                print("atlasmart: interrupted", file=sys.stderr)
                return EXIT_INTERRUPTED
            code, message = explain(exc)
            print(f"atlasmart: error: {' '.join(message.split())}", file=sys.stderr)
            return code


if __name__ == "__main__":
    sys.exit(main())
