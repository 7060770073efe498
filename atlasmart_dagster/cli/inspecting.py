"""Commands that show state: status, controls."""

from __future__ import annotations

import argparse

from ..domain.controls import ControlTuple
from ..product.published_controls import controls_of, metric_revenue_of
from ..product.serving import known_partitions, partition_statuses
from ..store.tables import CERTIFIED_ASSETS, CONTROL_ASSETS, REVENUE_ONLY, TABLES_BY_NAME
from ..errors import UsageError
from .context import CliContext, sales_date
from .output import print_json, short, table



def cmd_status(args: argparse.Namespace, ctx: CliContext) -> int:
    """Consumer-visible state per partition: certified with version and time, or why not."""
    platform = ctx.platform
    partitions = [args.partition] if args.partition else known_partitions(platform)
    statuses = partition_statuses(platform, partitions)
    if ctx.as_json:
        print_json([s.to_json() for s in statuses])
        return 0
    rows = []
    for s in statuses:
        finance = next(a for a in s.assets if a.asset == "mart_finance_daily_sales")
        cert = finance.served.certification if finance.served else None
        rows.append([
            s.partition,
            s.state,
            f"v{s.certified_version}" if s.certified_version else "-",
            finance.served.certified_at if finance.served else "-",
            short(cert.fingerprint) if cert else "-",
            s.slo_summary,
            s.detail,
        ])
    print(table(["sales_date", "state", "version", "certified_at", "fingerprint", "SLO", "detail"], rows))
    return 0


def _controls_at(platform, spec, partitions, snapshot_id=None) -> dict[str, ControlTuple]:
    if spec.controls == REVENUE_ONLY:
        revenue = metric_revenue_of(platform.warehouse, partitions, snapshot_id)
        return {p: ControlTuple(revenue_usd=v) for p, v in revenue.items()}
    return controls_of(platform.warehouse, spec, partitions, snapshot_id)


def cmd_controls_version(args: argparse.Namespace, ctx: CliContext) -> int:
    """One certified version of a day, re-read from the table at the snapshot it was certified at."""
    platform = ctx.platform
    if args.asset not in CERTIFIED_ASSETS or not args.partition:
        raise UsageError("--version needs --partition and a certified product: " + ", ".join(CERTIFIED_ASSETS))
    day = platform.ledger.partitions.states([args.partition], [args.asset]).get(args.asset, args.partition)
    versions = day.versions
    found = next((v for v in versions if v.version == args.version), None)
    if found is None:
        known = ", ".join(str(v.version) for v in versions) or "none"
        raise UsageError(f"{args.asset} {args.partition} has no certified version {args.version} (versions: {known})")
    cert = found.certification
    reread = _controls_at(platform, TABLES_BY_NAME[args.asset], [args.partition], cert.snapshot_id)[args.partition]
    served = day.served
    out = {
        "asset": args.asset, "partition": args.partition, "version": found.version,
        "certified_at": found.certified_at, "snapshot_id": cert.snapshot_id, "fingerprint": cert.fingerprint,
        "certified": cert.controls.to_json() if cert.controls else None, "read_at_snapshot": reread.to_json(),
        "served_now": served is not None and served.version == found.version,
        "versions": [v.version for v in versions],
    }
    if ctx.as_json:
        print_json(out)
        return 0
    state = "served now" if out["served_now"] else "no longer served"
    print(f"{args.asset} {args.partition} version {found.version} of {len(versions)} ({state}), certified "
          f"{found.certified_at} at snapshot {cert.snapshot_id}")
    print(table(["figures", "controls"], [["certified", str(cert.controls)], ["read at its snapshot", str(reread)]]))
    return 0


def cmd_controls(args: argparse.Namespace, ctx: CliContext) -> int:
    """Control tuple of an asset per partition, as published now (and as certified, for certified assets)."""
    if args.version is not None:
        return cmd_controls_version(args, ctx)
    platform = ctx.platform
    spec = TABLES_BY_NAME[args.asset]
    partitions = [args.partition] if args.partition else known_partitions(platform)
    published = _controls_at(platform, spec, partitions)
    served = platform.ledger.partitions.states(partitions, [args.asset]).served_map(args.asset)
    out = []
    for p in partitions:
        cert = served.get(p)
        out.append({
            "partition": p,
            "published": published[p].to_json(),
            "certified": cert.certification.controls.to_json() if cert and cert.certification.controls else None,
            "certified_version": cert.version if cert else None,
        })
    if ctx.as_json:
        print_json({"asset": args.asset, "partitions": out})
        return 0
    note = " (revenue only: the metric carries one measure)" if spec.controls == REVENUE_ONLY else ""
    print(f"{args.asset}{note}")
    certified_product = args.asset in CERTIFIED_ASSETS
    rows = [
        [
            o["partition"],
            str(published[o["partition"]]),
            str(served[o["partition"]].certification.controls)
            if o["certified"]
            else ("not certified" if certified_product else "n/a (not a certified product)"),
        ]
        for o in out
    ]
    print(table(["sales_date", "published controls", "certified controls"], rows))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help=cmd_status.__doc__, description=cmd_status.__doc__)
    p.add_argument("--partition", type=sales_date, help="one sales_date (YYYY-MM-DD); default: every known partition")
    p.set_defaults(handler=cmd_status)
    p = sub.add_parser("controls", help=cmd_controls.__doc__, description=cmd_controls.__doc__)
    p.add_argument("--asset", required=True, choices=CONTROL_ASSETS, help="one of " + ", ".join(CONTROL_ASSETS))
    p.add_argument("--partition", type=sales_date, help="one sales_date (YYYY-MM-DD); default: every known partition")
    p.add_argument("--version", type=int, help="with --partition: that certified version of the day (1 = first), "
                   "re-read at its certified snapshot")
    p.set_defaults(handler=cmd_controls)
