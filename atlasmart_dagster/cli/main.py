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
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys

from . import access, bench, demo, drills, incidents, inspecting, observability, operations, recovery
from .context import CliContext

COMMAND_MODULES = [demo, inspecting, operations, incidents, recovery, access, observability, drills, bench]


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
        parser_class=functools.partial(argparse.ArgumentParser, parents=[per_command]),
    )
    for module in COMMAND_MODULES:
        module.register(sub)
    p = sub.add_parser("dagster-home", help=cmd_dagster_home.__doc__, description=cmd_dagster_home.__doc__)
    p.set_defaults(handler=cmd_dagster_home)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Behave like a Unix tool when piped into head: exit quietly.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = build_parser().parse_args(argv)
    ctx = CliContext(
        home=args.home,
        landing=args.landing,
        clock=args.clock,
        as_json=args.json,
        ephemeral_instance=args.ephemeral_instance,
        log_level=args.dagster_log_level,
    )
    return args.handler(args, ctx)


if __name__ == "__main__":
    sys.exit(main())
