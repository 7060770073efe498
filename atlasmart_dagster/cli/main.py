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
  130  interrupted (Ctrl-C or SIGTERM): one line, "atlasmart: interrupted"; a
       run it stopped is recorded failed, and its day is loaded again by the
       next tick or backfill
"""

from __future__ import annotations

import argparse
import atexit
import functools
import importlib
import os
import signal
import sys
import traceback
from contextlib import contextmanager
from typing import Iterator

from ..defs.last_sales_date import LAST_SALES_DATE_ENV, last_sales_date_problem
from ..settings import DEFAULT_FIRST_SALES_DATE, Settings, current
from .context import CliContext
from .output import visible

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# Every command: the module of this package that registers and runs it, and
# the help line `atlasmart --help` lists. A module is imported only when its
# command is parsed, so `atlasmart --help` imports no command and a command
# imports only what it needs (cold start). The order is the listing's; a
# module's commands stay together, in the order its register() adds them.
# test_cold_start checks these lines against what the modules register.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo", "Load every partition present in the landing zone end to end, certify, print the controls."),
    "status": ("inspecting", "Consumer-visible state per partition: certified with version and time, or why not."),
    "controls": ("inspecting", "Control tuple of an asset per partition, as published now (and as certified, for "
                 "certified assets)."),
    "certify": ("operations", "Run the certification gate for a run started elsewhere (e.g. dagster asset "
                "materialize)."),
    "backfill": ("operations", "Rebuild a range of days in the backfill lane (one run), recording operator, reason "
                 "and incident."),
    "batch": ("batches", "Source batches: list; retire or reinstate one (loads leave it out or use it again); map "
              "its fields."),
    "restatement": ("batches", "A restatement held by the guard: the data owner approves its figures (then it is "
                    "certified)."),
    "anomaly": ("batches", "A day held by the anomaly guard: its owner approves the figures (certified) or rejects "
                "them (batches retired)."),
    "clock": ("gameday", "Show the home's clock (one per home) and logical time; set or advance logical time; "
              "switch the home's clock (use system|logical)."),
    "tick": ("gameday", "Evaluate the schedule and sensors at the clock's now, as the daemon would; run and certify "
             "what they ask."),
    "incident": ("incidents", "Work incidents: list, show, note, triage, contain, notify, repair, verify, resolve, "
                 "postmortem, report, detect."),
    "blast-radius": ("incidents", "Everything downstream of an asset or a source field: assets, checks, marts, "
                     "dashboards, consumers, owners."),
    "contract": ("incidents", "Approve a source contract version for a batch (the owner's compatibility decision)."),
    "dashboard": ("incidents", "Show, deploy or restore a dashboard definition; `check` runs the golden "
                  "cross-checks."),
    "backup": ("recovery", "Back up the committed state of the home (catalog, table files, raw store, ledger), even "
               "while runs write."),
    "restore": ("recovery", "Restore a backup into its home, all or nothing (staged and checked beside it first), "
                "then verify. The previous home is kept beside it as <home>.damaged-<time>; a failure before the "
                "swap leaves it untouched."),
    "relocate": ("recovery", "Make a home copied or moved to this path (cp -a) work here: rewrite its tables' "
                 "metadata, then verify."),
    "verify": ("recovery", "Recompute controls and fingerprints of every certified partition and compare them with "
               "the ledger."),
    "maintain": ("recovery", "Expire Iceberg snapshots nothing relies on any more (keeps commits fast); optionally "
                 "delete orphan files."),
    "rollback": ("recovery", "Put one partition of one table back to the version its last certification was built "
                 "on."),
    "migrate": ("migrate", "Copy an embedded home (ledger, catalog, table files, raw batches) into an empty team "
                "deployment, then verify it."),
    "query": ("access", "Run one SELECT as a role or principal, seeing only what the access policy grants it."),
    "access": ("access", "Print the effective allow/deny matrix, permissions and principals as evidence."),
    "metrics": ("observability", "Prometheus metrics from the ledger: `serve` on 127.0.0.1, or `write` a textfile "
                "for node-exporter."),
    "notify": ("notify", "Notification channels: send a test message (`test CHANNEL`), list deliveries "
               "(`status`), send what is due."),
    "drill": ("drills", "Run a drill end to end on logical time in a scratch home and write its evidence."),
    "generate": ("bench", "Write a landing zone of N days x M rows (Parquet + manifests) and its expected controls."),
    "bench": ("bench", "Time our Dagster runs against the pure-DuckDB reference and the dagster-dbt peer; write "
              "results.json, RESULTS.md and chart.png."),
    "dagster-home": ("dagster_home", "Print the DAGSTER_HOME prepared for this AtlasMart home (with the project's "
                     "dagster.yaml)."),
}


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
        "--clock", choices=["system", "logical"], **keep,
        help="time source: must be the home's clock (default $ATLASMART_CLOCK, else the home's)",
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


class CommandParser(Parser):
    """A command's entry in ``atlasmart``'s parser: the module behind it is imported when the command is parsed.

    It hands the command's arguments to the parser its module registers, the
    same parser a parser built all at once would hold.
    """

    def __init__(self, *, command: str, module: str, **kwargs):
        super().__init__(add_help=False, **kwargs)
        self.command, self.module = command, module

    def parse_known_args(self, args=None, namespace=None):
        return command_parser(self.command, self.module).parse_known_args(args, namespace)


def command_parser(name: str, module: str) -> argparse.ArgumentParser:
    """The parser of command ``name``, as its module registers it (this imports the module)."""
    # Every command also accepts the common options after its name
    # (``atlasmart status --json``), through the public ``parser_class`` hook.
    registered = Parser(prog="atlasmart", add_help=False).add_subparsers(
        prog="atlasmart", parser_class=functools.partial(Parser, parents=[_common_options(defaults=False)])
    )
    importlib.import_module(f"{__package__}.{module}").register(registered)
    return registered.choices[name]


def build_parser() -> argparse.ArgumentParser:
    """``atlasmart``'s parser; no command module is imported until its command is parsed (cold start)."""
    parser = Parser(
        prog="atlasmart",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_common_options(defaults=True)],
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=CommandParser)
    for name, (module, help_line) in COMMANDS.items():
        sub.add_parser(name, help=help_line, command=name, module=module)
    return parser


def explain(exc: Exception) -> tuple[int, str]:
    """The exit code and the one line to print for an exception that ended a command."""
    from ..errors import AtlasmartError, UsageError  # local: it loads DuckDB, which --help does not need (cold start)

    if isinstance(exc, UsageError):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, AtlasmartError):
        return EXIT_FAILED, str(exc)
    # Only a command that loaded Dagster can raise Dagster's errors: never load it here (cold start).
    dg = sys.modules.get("dagster")
    if dg is not None and isinstance(exc, dg.DagsterUnknownPartitionError):
        from ..defs.partitions import partitions_span  # local: needs Dagster, loaded already (see above)

        return EXIT_USAGE, f"{exc} (partitions are {partitions_span()})"
    return EXIT_FAILED, f"unexpected {type(exc).__name__}: {exc}; run again with --debug for the traceback"


@contextmanager
def _noticing_interrupts() -> Iterator[list[int]]:
    """Turn Ctrl-C and SIGTERM into KeyboardInterrupt, and note them even when a library turns that into its
    own error (DuckDB raises RuntimeError). Runs note a stop signal themselves (``ops/runs/chains.py``)."""
    noticed: list[int] = []

    def notice(signum, frame):
        noticed.append(signum)
        raise KeyboardInterrupt

    # A signal ignored (a background job) or handled by the caller is left so.
    ours = [s for s, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL))
            if signal.getsignal(s) is default]
    previous = {s: signal.signal(s, notice) for s in ours}
    try:
        yield noticed
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


# Options whose value is free text a person typed: redacted before any command stores it
# (a reason may quote a customer's complaint). Names and addresses of staff are
# given in --by/--actor/--owner, which are identities and stay as typed.
FREE_TEXT_OPTIONS = ("reason", "text", "summary", "gap", "verification", "evidence", "description", "repair",
                     "next_update")


# Documented limits (docs/incidents.md): an identity is a short field, free text a note, never a file.
SHORT_OPTIONS, SHORT_MAX, TEXT_MAX = ("actor", "operator", "owner", "by", "approved_by"), 200, 10_000


def _interrupted(args: argparse.Namespace | None) -> int:
    """Say "interrupted" in one line and keep the teardown quiet: objects a stop signal cut off mid-operation (an
    event loop whose pipe is already closed) may report errors while the interpreter collects them, after the
    line that matters; --debug shows them."""
    print("atlasmart: interrupted", file=sys.stderr)
    if args is None or not args.debug:
        sys.unraisablehook = lambda unraisable: None
    return EXIT_INTERRUPTED


def _check_settings() -> None:
    """The settings every command depends on are checked before any command is parsed (parsing one loads the
    partitions, which are built from ``$ATLASMART_FIRST_SALES_DATE`` and ``$ATLASMART_LAST_SALES_DATE``): a bad
    value is a usage error (exit 2)."""
    environ = current().environ
    first = (environ.get(Settings.first_sales_date.name) or "").strip() or DEFAULT_FIRST_SALES_DATE
    problem = Settings.first_sales_date.problem(environ) or last_sales_date_problem(environ.get(LAST_SALES_DATE_ENV), first)
    if problem:
        from ..errors import UsageError  # local: cold start

        raise UsageError(problem)


def _check_lengths(args: argparse.Namespace) -> None:
    """A value over its limit is a usage error (exit 2), before anything is opened or recorded."""
    from ..errors import UsageError  # local: cold start

    for names, limit in ((SHORT_OPTIONS, SHORT_MAX), (FREE_TEXT_OPTIONS, TEXT_MAX)):
        for name in names:
            value = getattr(args, name, None)
            if isinstance(value, str) and len(value) > limit:
                raise UsageError(f"--{name.replace('_', '-')} is {len(value):,} characters; at most {limit:,} are "
                                 f"taken (see docs/incidents.md)")


def _check_incident_reference(args: argparse.Namespace, ctx: CliContext) -> None:
    """An ``--incident`` that names no incident is a usage error (exit 2), before the command records anything.

    Every command that links what it records to an incident (backfill, batch, restatement, anomaly, contract)
    takes it as ``--incident``; this is the one place that checks it.
    """
    incident_id = getattr(args, "incident", None)
    if not incident_id:
        return
    from ..errors import UsageError  # local: cold start
    from ..store.ledger.incidents import IncidentStore, UnknownIncident  # local: only these commands

    try:
        IncidentStore(ctx.platform.ledger).get(incident_id)
    except UnknownIncident:
        raise UsageError(f"no such incident {incident_id}, nothing was recorded (`atlasmart incident list --all` "
                         "lists them)") from None


def _redact_free_text(args: argparse.Namespace, ctx: CliContext) -> None:
    present = [name for name in FREE_TEXT_OPTIONS if isinstance(getattr(args, name, None), str) and getattr(args, name)]
    if not present:
        return
    from ..product.pii import redact_for  # local: only commands that take free text need it (cold start)

    clean = redact_for(ctx.platform)
    for name in present:
        setattr(args, name, clean(getattr(args, name)))


# Commands that can change what on-call or consumers must be told: what became due is sent
# as they end (incident_sensor sends it too, on its next tick, where a daemon runs).
NOTIFYING_COMMANDS = ("incident", "anomaly", "restatement", "tick", "backfill", "certify", "demo")


def _deliver_notifications(args: argparse.Namespace, ctx: CliContext) -> None:
    """Send the notifications a command made due; a problem is a line on stderr, never the command's failure."""
    if args.command not in NOTIFYING_COMMANDS:
        return
    from ..ops.response.notifications import deliver_pending  # local: only these commands need it (cold start)

    opened = vars(ctx)  # what the command opened already (cached properties); nothing more is opened here
    report = deliver_pending(ctx.platform, graph=ctx.defs.resolve_asset_graph() if "defs" in opened else None,
                             instance=ctx.instance if "instance" in opened else None)
    if report.problem or report.failed or report.gave_up:
        print(f"atlasmart: notifications: {report.line()}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run one command; the one place where errors become a line on stderr and an exit code."""
    # Behave like a Unix tool when piped into head: exit quietly.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = ctx = None
    with _noticing_interrupts() as interrupted:
        try:
            _check_settings()
            args = build_parser().parse_args(argv)  # argument errors exit 2 here, with one line
            _check_lengths(args)
            ctx = CliContext(
                home=args.home,
                landing=args.landing,
                clock=args.clock,
                as_json=args.json,
                ephemeral_instance=args.ephemeral_instance,
                log_level=args.dagster_log_level,
            )
            _check_incident_reference(args, ctx)
            _redact_free_text(args, ctx)
            code = args.handler(args, ctx)
            _deliver_notifications(args, ctx)
            return code
        except KeyboardInterrupt:
            if args is not None and args.debug:
                traceback.print_exc()
            return _interrupted(args)
        except Exception as exc:
            if args is not None and args.debug:
                raise
            if interrupted:
                return _interrupted(args)
            code, message = explain(exc)
            print(f"atlasmart: error: {visible(' '.join(message.split()))}", file=sys.stderr)
            return code
        finally:
            if ctx is not None:
                ctx.close()


if __name__ == "__main__":
    sys.exit(main())


def run() -> None:
    """The installed ``atlasmart`` command: ``main()``, then an exit that skips the interpreter's teardown.

    Tearing down the modules a command loaded (Dagster, pyiceberg, SQLAlchemy,
    alembic) took 0.45 s of every command's 1.9 s floor, and nothing of ours
    needs it: every write is committed before ``main`` returns. The exit is an
    exit handler registered before any other, so it runs last: Python has
    already waited for threads and run every other handler (Dagster's, the
    DuckDB engine's close, logging's flush) when it ends the process with the
    command's code. An exception that escapes ``main`` (or a non-numeric exit)
    takes the ordinary way out, traceback and all.
    """
    atexit.register(_exit_with, _EXIT_CODE)
    try:
        code = main()
    except SystemExit as stop:  # argparse's exits (usage errors, --help) come this way
        code = stop.code
    if code is None or isinstance(code, int):
        _EXIT_CODE.append(code or 0)
    sys.exit(code)


_EXIT_CODE: list[int] = []


def _exit_with(code: list[int]) -> None:
    if not code:
        return
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (piped into head): nothing more to say
            pass
    os._exit(code[0])
