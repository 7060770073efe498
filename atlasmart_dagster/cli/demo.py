"""`atlasmart demo`: load every landed day end to end, certify, print the controls.

A landing folder dated outside the partitions (before the first one, or a day
that has not ended yet) cannot be loaded by Dagster; it is skipped and listed
with the reason. Skipping is not a failure: the exit code says whether what
was loaded loaded (0) or not (1).
"""

from __future__ import annotations

import argparse

from ..domain.controls import ControlTuple, total
from ..errors import AtlasmartError, UsageError
from ..ops.runs.chains import run_chain, run_reference
from ..product.serving import partition_status
from .context import CliContext, partition_problem
from .output import print_json, short, table, visible


def staging_counts(ctx: CliContext, partition: str) -> dict | None:
    built = ctx.platform.ledger.partitions.states([partition], ["stg_order_lines"]).get("stg_order_lines", partition).builds
    return built[-1].detail if built else None


def committed_source_seq(ctx: CliContext, partitions: list[str]) -> int | None:
    highs = [b["source_seq_high"] for p in partitions for b in ctx.platform.ledger.batches.list(p)]
    return max(highs) if highs else None


def cmd_demo(args: argparse.Namespace, ctx: CliContext) -> int:
    """Load every partition present in the landing zone end to end, certify, print the controls."""
    platform = ctx.platform
    landed = platform.landing.partitions()
    problems = {p: partition_problem(p) for p in landed}
    skipped = [{"partition": p, "reason": problem} for p, problem in problems.items() if problem]
    partitions = [p for p, problem in problems.items() if not problem]
    if not partitions:
        found = f"only folders outside the partitions ({'; '.join(s['reason'] for s in skipped)})" if skipped else "nothing"
        raise UsageError(
            f"no day to load in landing zone {platform.landing_root}: found {found}; "
            "point --landing (or $ATLASMART_LANDING) at folders named sales_date=YYYY-MM-DD"
        )
    if not run_reference(ctx.defs, ctx.instance, ctx.log_level):
        raise AtlasmartError("loading the reference dimensions failed; see the Dagster run logs")
    outcomes = [run_chain(ctx.defs, ctx.instance, platform, [p], log_level=ctx.log_level) for p in partitions]
    rows, report = [], []
    staged_total = {"staged": 0, "accepted": 0, "quarantined": 0}
    certified: list[ControlTuple] = []
    for outcome in outcomes:
        partition = outcome.partitions[0]
        counts = staging_counts(ctx, partition) if outcome.success else None
        status = partition_status(platform, partition)
        finance = next((a for a in status.assets if a.asset == "mart_finance_daily_sales"), None)
        controls = finance.served.certification.controls if finance and finance.served else None
        if counts:
            staged_total["staged"] += counts["raw_rows"]
            staged_total["accepted"] += counts["accepted"]
            staged_total["quarantined"] += counts["quarantined"]
        if controls and partition in outcome.certified:
            certified.append(controls)
        report.append(
            {
                "partition": partition,
                "run_id": outcome.run_id,
                "lane": outcome.lane,
                "success": outcome.success,
                "failures": outcome.failures,
                "staged": counts["raw_rows"] if counts else None,
                "accepted": counts["accepted"] if counts else None,
                "quarantined": counts["quarantined"] if counts else None,
                "state": status.state,
                "certified_version": status.certified_version,
                "controls": controls.to_json() if controls else None,
            }
        )
        rows.append(
            [
                partition,
                short(outcome.run_id, 8),
                outcome.lane,
                counts["raw_rows"] if counts else "-",
                counts["accepted"] if counts else "-",
                counts["quarantined"] if counts else "-",
                status.state + (f" v{status.certified_version}" if status.certified_version else ""),
                str(controls) if controls else "; ".join(outcome.failures) or status.detail,
            ]
        )
    grand = total(certified)
    seq = committed_source_seq(ctx, [r["partition"] for r in report if r["success"]])
    if ctx.as_json:
        print_json(
            {
                "home": str(platform.home.root),
                "landing": str(platform.landing_root),
                "partitions": report,
                "skipped": skipped,
                "total": {**staged_total, "controls": grand.to_json(), "committed_source_seq": seq},
            }
        )
    else:
        print(f"AtlasMart demo: home {platform.home.root}\n                landing {platform.landing_root}\n")
        rows.append(["total", "", "", staged_total["staged"], staged_total["accepted"], staged_total["quarantined"], "", str(grand)])
        print(table(
            ["sales_date", "run", "lane", "staged", "accepted", "quarantined", "state", "certified controls (lines, orders, units, revenue, cost, profit)"],
            rows,
        ))
        print(f"\ncommitted source seq: {seq}")
        for s in skipped:
            print(f"skipped sales_date={visible(s['partition'])}: {visible(s['reason'])}")
    return 0 if all(o.success for o in outcomes) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help=cmd_demo.__doc__, description=cmd_demo.__doc__)
    p.set_defaults(handler=cmd_demo)
