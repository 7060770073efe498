"""Commands over source batches: list, retire, reinstate, map fields; decide a held restatement or anomaly.

A retired batch stays in the raw store as evidence and is left out of every
later load of its day; reload the day afterwards (``atlasmart backfill``) to
publish it without the batch. A mapping is read on the batch's next load.
"""

from __future__ import annotations

import argparse

from ..errors import AtlasmartError
from ..product.batch_lifecycle import REINSTATED, RETIRED, decide, retired_batches
from ..product.contract_approvals import approve_mapping
from ..product.anomaly import anomaly_held_builds, approve_anomaly, reject_anomaly
from ..product.restatements import approve_restatement, held_builds
from .context import CliContext, sales_date
from .output import print_json, table, visible


def cmd_batch_list(args: argparse.Namespace, ctx: CliContext) -> int:
    """Every admitted batch (of one day, or all) with its contract and whether loads use it."""
    ledger = ctx.platform.ledger
    retired = retired_batches(ledger, args.partition)
    rows = []
    for b in ledger.batches.list(args.partition):
        decision = retired.get(b["batch_id"])
        rows.append({
            "batch_id": b["batch_id"], "partition": b["partition"], "rows": b["expected_rows"],
            "source_seq": f"{b['source_seq_low']}..{b['source_seq_high']}", "contract": b["contract_applied"],
            "ready_at": b["ready_at"], "state": "retired" if decision else "accepted",
            "decided_by": decision.actor if decision else None, "reason": decision.reason if decision else None,
        })
    if ctx.as_json:
        print_json(rows)
    else:
        print(table(["batch", "sales_date", "rows", "source_seq", "contract", "ready_at", "state", "why"],
                    [[r["batch_id"], r["partition"], r["rows"], r["source_seq"], r["contract"], r["ready_at"],
                      r["state"], f"{r['decided_by']}: {r['reason']}" if r["decided_by"] else ""] for r in rows]))
    return 0


def _decide(args: argparse.Namespace, ctx: CliContext, decision: str) -> int:
    made = decide(ctx.platform, args.batch, decision, args.by, args.reason, ctx.platform.clock.now(), args.incident)
    if ctx.as_json:
        print_json(made.__dict__)
    else:
        verb = "retired: loads of" if decision == RETIRED else "reinstated: loads of"
        print(f"{made.batch_id} {verb} {made.partition} {'leave it out' if decision == RETIRED else 'use it again'} "
              f"(its bytes stay in the raw store).\nReload the day to publish the change: atlasmart backfill "
              f"--from {made.partition} --to {made.partition} --operator {visible(args.by)} --reason ...")
    return 0


def cmd_batch_retire(args: argparse.Namespace, ctx: CliContext) -> int:
    """Leave a batch out of every later load of its day (a drifted or rejected delivery); keeps its bytes."""
    return _decide(args, ctx, RETIRED)


def cmd_batch_reinstate(args: argparse.Namespace, ctx: CliContext) -> int:
    """Use a retired batch again in later loads of its day."""
    return _decide(args, ctx, REINSTATED)


def _renames(pairs: list[str]) -> dict[str, str]:
    renames = {}
    for pair in pairs:
        source, sep, canonical = pair.partition("=")
        if not sep or not source.strip() or not canonical.strip():
            raise AtlasmartError(f"--rename takes SOURCE=CONTRACT_FIELD (e.g. qty=quantity), not {pair!r}")
        renames[source.strip()] = canonical.strip()
    return renames


def cmd_batch_map(args: argparse.Namespace, ctx: CliContext) -> int:
    """The contract owner approves a field mapping for one batch (source field = contract field)."""
    ledger = ctx.platform.ledger
    known = {b["batch_id"]: b for b in ledger.batches.list()}
    if args.batch not in known:
        raise AtlasmartError(f"no batch {args.batch} was ever admitted (see atlasmart batch list)")
    batch = known[args.batch]
    approval = approve_mapping(ledger, args.batch, batch["partition"], args.base, _renames(args.rename), args.owner,
                               args.by, args.reason, ctx.platform.clock.now(), args.incident)
    if ctx.as_json:
        print_json({"approval_id": approval, "batch_id": args.batch, "partition": batch["partition"]})
    else:
        print(f"mapping approved for {args.batch} ({batch['partition']}): {visible(', '.join(args.rename))} on contract "
              f"{visible(args.base)}; the next load of the day reads the batch with it.")
    return 0


def _certify_approved(args: argparse.Namespace, ctx: CliContext, approve, held_of, what: str) -> int:
    """Record the owner's approval of the held figures, then certify the held builds."""
    # Local: only these commands certify, which loads Dagster and the checks (cold start).
    from ..defs.checks.certification_checks import report_day_states
    from ..product.run_certification import certify_and_deliver

    platform = ctx.platform
    held = held_of(platform, args.partition)
    controls = approve(platform, args.partition, args.owner, args.by, args.reason, platform.clock.now(), args.incident)
    decisions = certify_and_deliver(platform, held, True, f"{args.by} ({what} approved)")
    report_day_states(ctx.instance, platform, [args.partition])
    certified = all(d.certified for d in decisions) and bool(decisions)
    if ctx.as_json:
        print_json({"partition": args.partition, "approved_controls": controls.to_json(),
                    "decisions": [d.to_json() for d in decisions]})
    else:
        print(f"{args.partition}: approved {controls}")
        for d in decisions:
            print(f"  {d.asset:<26} {'CERTIFIED' if d.certified else 'REFUSED: ' + '; '.join(d.reasons)}")
    return 0 if certified else 1


def cmd_restatement_approve(args: argparse.Namespace, ctx: CliContext) -> int:
    """The data owner approves the figures of a held restatement; the held build is certified as the next version."""
    return _certify_approved(args, ctx, approve_restatement, held_builds, "restatement")


def cmd_anomaly(args: argparse.Namespace, ctx: CliContext) -> int:
    """A day held by the anomaly guard: its owner approves the figures (certified) or rejects them (batches retired)."""
    _require(args, f"anomaly {args.action}", "partition", "owner", "by", "reason")
    if args.action == "approve":
        return _certify_approved(args, ctx, approve_anomaly, anomaly_held_builds, "anomaly")
    from ..defs.checks.certification_checks import report_day_states

    platform = ctx.platform
    retired = reject_anomaly(platform, args.partition, args.owner, args.by, args.reason, platform.clock.now(),
                             args.incident)
    report_day_states(ctx.instance, platform, [args.partition])
    if ctx.as_json:
        print_json({"partition": args.partition, "rejected": True, "retired_batches": retired})
    else:
        print(f"{args.partition}: held figures rejected; retired {', '.join(retired) or 'no batch'} (bytes kept in "
              "the raw store). The day serves nothing until a corrected delivery is loaded.")
    return 0


def _require(args: argparse.Namespace, action: str, *names: str) -> None:
    missing = [n for n in names if not getattr(args, n.replace("-", "_"))]
    if missing:
        raise AtlasmartError(f"{action} needs {', '.join(('' if n == 'batch' else '--') + n for n in missing)}")


BATCH_ACTIONS = {
    "list": ((), cmd_batch_list),
    "retire": (("batch", "by", "reason"), cmd_batch_retire),
    "reinstate": (("batch", "by", "reason"), cmd_batch_reinstate),
    "map": (("batch", "rename", "owner", "by", "reason"), cmd_batch_map),
}


def cmd_batch(args: argparse.Namespace, ctx: CliContext) -> int:
    """Source batches: list; retire or reinstate one (loads leave it out or use it again); map its fields."""
    required, handler = BATCH_ACTIONS[args.action]
    _require(args, f"batch {args.action}", *required)
    return handler(args, ctx)


def cmd_restatement(args: argparse.Namespace, ctx: CliContext) -> int:
    """A restatement held by the guard: the data owner approves its figures (then it is certified)."""
    _require(args, "restatement approve", "partition", "owner", "by", "reason")
    return cmd_restatement_approve(args, ctx)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("batch", help=cmd_batch.__doc__, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=list(BATCH_ACTIONS))
    p.add_argument("batch", nargs="?", help="batch id (atlasmart batch list)")
    p.add_argument("--partition", "--day", type=sales_date, help="list: one sales_date (default: all)")
    p.add_argument("--by", help="who decides or approves (recorded in the ledger)")
    p.add_argument("--reason", help="why (recorded in the ledger)")
    p.add_argument("--incident", help="incident id this belongs to")
    p.add_argument("--rename", action="append", metavar="SOURCE=FIELD",
                   help="map: a source field and the contract field it is (repeat for several)")
    p.add_argument("--base", default="v1", help="map: the contract version the mapping extends (default v1)")
    p.add_argument("--owner", help="map: the contract owner approving (e.g. erp-operations)")
    p.set_defaults(handler=cmd_batch)

    p = sub.add_parser("restatement", help=cmd_restatement.__doc__, description=cmd_restatement_approve.__doc__)
    p.add_argument("action", choices=["approve"])
    p.add_argument("--partition", "--day", type=sales_date, help="the sales_date whose re-send is held")
    p.add_argument("--owner", help="the data owner approving (the contract's owner)")
    p.add_argument("--by", help="the person approving")
    p.add_argument("--reason", help="why these figures are right")
    p.add_argument("--incident", help="incident id this belongs to")
    p.set_defaults(handler=cmd_restatement)

    p = sub.add_parser("anomaly", help=cmd_anomaly.__doc__, description=cmd_anomaly.__doc__)
    p.add_argument("action", choices=["approve", "reject"])
    p.add_argument("--partition", "--day", type=sales_date, help="the sales_date held by the anomaly guard")
    p.add_argument("--owner", help="the data owner deciding (the contract's owner)")
    p.add_argument("--by", help="the person deciding")
    p.add_argument("--reason", help="why (recorded with the figures)")
    p.add_argument("--incident", help="incident id this belongs to")
    p.set_defaults(handler=cmd_anomaly)
