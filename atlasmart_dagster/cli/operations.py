"""Commands that act on runs: certify a run started elsewhere, backfill a range of days."""

from __future__ import annotations

import argparse
import time

from ..store.tables import DAILY_CHAIN
from ..defs.checks.certification_checks import report_day_states
from ..errors import AtlasmartError, UsageError
from ..ops.runs.backfills import BackfillRequest, earlier_submission, left_behind, run_backfill, submit_to_daemon
from ..product.run_certification import certify_run_read
from ..store.instance.dagster_instance import resolve_run_id
from .context import CliContext, sales_date
from .output import print_json, visible


def cmd_certify(args: argparse.Namespace, ctx: CliContext) -> int:
    """Run the certification gate for a run started elsewhere (e.g. dagster asset materialize)."""
    run_id = resolve_run_id(ctx.instance, args.run)
    record = ctx.instance.get_run_record_by_id(run_id) if run_id else None
    if record is None:
        raise AtlasmartError(
            f"run {args.run} is not in the Dagster instance {ctx.instance.root_directory}: "
            "check the run id (a unique prefix such as the 8 characters the UI shows will do), and that "
            "DAGSTER_HOME names the instance the run was launched on"
        )
    args.run = run_id
    succeeded = record.dagster_run.status.value == "SUCCESS"
    certified = certify_run_read(ctx.platform, run_id, succeeded, actor=args.actor)
    decisions = certified.decisions
    report_day_states(ctx.instance, ctx.platform, sorted({d.partition for d in decisions}), certified.states)
    if ctx.as_json:
        print_json([d.to_json() for d in decisions])
    else:
        if not decisions:
            print(f"run {args.run}: nothing to certify (no certified asset built, or already decided)")
        for d in decisions:
            verdict = "CERTIFIED" if d.certified else "REFUSED: " + "; ".join(d.reasons)
            print(f"{d.partition}  {d.asset:<26} {verdict}" + "".join(f" ({n})" for n in d.notes))
    return 0 if all(d.certified for d in decisions) else 1


def cmd_backfill(args: argparse.Namespace, ctx: CliContext) -> int:
    """Rebuild a range of days in the backfill lane (one run), recording operator, reason and incident."""
    request = BackfillRequest(
        start=args.start,
        end=args.end,
        operator=args.operator,
        reason=args.reason,
        incident_id=args.incident,
        start_at=args.start_at,
        include_current=args.include_current,
    )
    # Refuse a bad range before anything is printed, recorded or run.
    problems = request.validate(ctx.platform)
    if problems:
        raise UsageError("backfill refused: " + "; ".join(problems))
    # The same days and assets submitted before and not finished (its command stopped waiting):
    # that backfill is waited for (or returned), never queued a second time.
    # Or one the daemon finished since its command stopped waiting, which a waiting command collects
    # (run_backfill); a --via-daemon submission never waits, so for it that is new work.
    earlier = earlier_submission(ctx.instance, ctx.platform, request)
    finished = None if earlier or args.via_daemon else left_behind(ctx.instance, ctx.platform, request)
    earlier = earlier or finished
    if earlier and not ctx.as_json:
        state = ("was finished by the daemon since its command stopped waiting: its outcome is collected here"
                 if finished else "is not finished: using it")
        print(f"Dagster backfill {earlier} of the same days and assets, submitted earlier, {state} instead of "
              "submitting another", flush=True)
    if args.via_daemon:
        backfill_id = submit_to_daemon(ctx.defs, ctx.instance, ctx.platform, request)
        result = {"submitted": True, "dagster_backfill_id": backfill_id, "partitions": request.partitions,
                  "earlier_submission": earlier}
        if ctx.as_json:
            print_json(result)
        else:
            print(f"submitted Dagster backfill {backfill_id} for {request.start}..{request.end} "
                  f"({len(request.partitions)} days); the daemon runs it in the backfill lane")
        return 0
    started = time.monotonic()
    if not ctx.as_json:
        scope = f"from {request.start_at} down" if request.start_at else "whole chain"
        print(f"backfill {request.start}..{request.end} ({len(request.partitions)} days, {scope}) "
              f"in the backfill lane for {visible(request.operator)}: {visible(request.reason)}", flush=True)
    from ..bench.progress import Progress  # lazy: loaded by its command only

    progress = Progress("backfill", len(request.partitions), enabled=None if not ctx.as_json else False)
    outcome = run_backfill(
        ctx.defs, ctx.instance, ctx.platform, request, wait_seconds=args.wait, log_level=ctx.log_level,
        progress=progress,
    )
    elapsed = round(time.monotonic() - started, 2)
    if ctx.as_json:
        print_json({**outcome.to_json(), "request_id": outcome.request_id, "elapsed_seconds": elapsed,
                    "earlier_submission": earlier})
    else:
        verdict = "succeeded" if outcome.success else "FAILED: " + "; ".join(outcome.failures)
        print(f"run {outcome.run_id} {verdict} in {elapsed} s")
        print(f"certified: {', '.join(outcome.certified) or 'nothing'}")
        for refused in (d for d in outcome.decisions if not d.certified):
            print(f"refused {refused.asset} {refused.partition}: {'; '.join(refused.reasons)}")
        noted = {(d.partition, n) for d in outcome.decisions if d.certified for n in d.notes}
        for day, note in sorted(noted):
            print(f"note {day}: {note}")
        print(f"recorded as {outcome.request_id} in the ledger")
    return 0 if outcome.success and all(d.certified for d in outcome.decisions) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("certify", help=cmd_certify.__doc__, description=cmd_certify.__doc__)
    p.add_argument("--run", required=True, help="Dagster run id whose builds to certify (a unique prefix, e.g. the 8 characters the UI shows)")
    p.add_argument("--actor", default="operator", help="who certifies (recorded in the ledger)")
    p.set_defaults(handler=cmd_certify)
    p = sub.add_parser("backfill", help=cmd_backfill.__doc__, description=cmd_backfill.__doc__)
    p.add_argument("--from", dest="start", required=True, type=sales_date, help="first sales_date (YYYY-MM-DD)")
    p.add_argument("--to", dest="end", required=True, type=sales_date, help="last sales_date (YYYY-MM-DD)")
    p.add_argument("--operator", required=True, help="who runs the backfill (recorded in the ledger and run tags)")
    p.add_argument("--reason", required=True, help="why history is being rebuilt")
    p.add_argument("--incident", help="incident id the backfill serves")
    p.add_argument("--start-at", choices=DAILY_CHAIN, help="rebuild from this asset down only (smallest repair scope)")
    p.add_argument("--include-current", action="store_true", help="allow the current day in the range (explicit)")
    p.add_argument("--via-daemon", action="store_true", help="submit as a Dagster asset backfill for the daemon")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for the backfill lane to be free")
    p.set_defaults(handler=cmd_backfill)
