"""Commands for performance: generate a landing zone, run the benchmark."""

from __future__ import annotations

import argparse
from pathlib import Path

from .context import CliContext, iso_date
from .output import print_json


def cmd_generate(args: argparse.Namespace, ctx: CliContext) -> int:
    """Write a landing zone of N days x M rows (Parquet + manifests) and its expected controls."""
    from ..bench.generator import generate  # lazy: loaded by its command only
    from ..bench.progress import Progress  # lazy: loaded by its command only

    progress = Progress("generate", args.days, enabled=None if not ctx.as_json else False)
    expected = generate(Path(args.out), args.days, args.rows, start=args.start,
                        progress=lambda d, t, r: progress.update(d, r))
    progress.done(args.days * args.rows)
    summary = {"out": args.out, "days": args.days, "rows_per_day": args.rows,
               "expected": expected["days"][min(expected["days"])]}
    print_json(summary) if ctx.as_json else print(
        f"wrote {args.days} days x {args.rows:,} rows to {args.out}/landing; expected figures in {args.out}/expected.json")
    return 0


def cmd_bench(args: argparse.Namespace, ctx: CliContext) -> int:
    """Time our Dagster runs against the pure-DuckDB reference and the dagster-dbt peer; write results.json, RESULTS.md and chart.png."""
    from ..bench.runner import run_benchmark  # lazy: loaded by its command only

    workdir = Path(args.workdir) if args.workdir else ctx.platform.home.root / "bench"
    out = Path(args.out) if args.out else workdir / "results"
    report = run_benchmark(workdir, out, quick=args.quick, show_progress=None if not ctx.as_json else False,
                           repeats=args.repeats, with_peer=not args.no_peer, only=args.scenario)
    if ctx.as_json:
        print_json(report)
    else:
        print((out / "RESULTS.md").read_text())
        print(f"results in {out}")
    return 0 if report["all_correct"] else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help=cmd_generate.__doc__, description=cmd_generate.__doc__)
    p.add_argument("--days", type=int, required=True)
    p.add_argument("--rows", type=int, required=True, help="rows per day")
    p.add_argument("--start", default="2026-09-17", type=iso_date, help="first sales_date (YYYY-MM-DD)")
    p.add_argument("--out", required=True, help="folder (landing/ and expected.json are written there)")
    p.set_defaults(handler=cmd_generate)
    p = sub.add_parser("bench", help=cmd_bench.__doc__, description=cmd_bench.__doc__)
    p.add_argument("--quick", action="store_true", help="small scenarios, the peer on one of them (under two minutes)")
    p.add_argument("--repeats", type=int, help="measurements per implementation and scenario (default: the "
                   "scenario's, 3 where the peer runs); the tables show medians")
    p.add_argument("--no-peer", action="store_true",
                   help="leave out the dagster-dbt peer (it needs the bench extra: pip install atlasmart_dagster[bench])")
    p.add_argument("--scenario", action="append", metavar="NAME",
                   help="run only this scenario (repeatable), e.g. cli_range_30x100k")
    p.add_argument("--workdir", help="scratch folder for data and homes (default <home>/bench)")
    p.add_argument("--out", help="where results go (default <workdir>/results)")
    p.set_defaults(handler=cmd_bench)
