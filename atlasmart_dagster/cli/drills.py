"""Command: drill (run an incident scenario on logical time in a scratch home)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .context import CliContext
from .output import print_json

DRILLS = ("failed-load", "source-late", "schema-drift", "semantic-bug", "anomaly-hold", "dr", "raw-evidence-loss")


def cmd_drill(args: argparse.Namespace, ctx: CliContext) -> int:
    """Run a drill end to end on logical time in a scratch home and write its evidence."""
    workdir = Path(args.workdir) if args.workdir else ctx.platform.home.root / "drills" / args.name
    if args.name == "failed-load":
        from ..drills.failed_load import run_drill  # lazy: loaded by its command only

        summary = run_drill(workdir, ephemeral_instance=ctx.ephemeral_instance, log_level=ctx.log_level)
        signals = summary.pop("_signals_text")
    elif args.name == "dr":
        from ..drills.dr import run_drill as run_dr  # lazy: loaded by its command only

        summary = run_dr(workdir, ephemeral_instance=ctx.ephemeral_instance, log_level=ctx.log_level)
        signals = summary.pop("_text")
    elif args.name == "raw-evidence-loss":
        from ..drills.raw_evidence_loss import run_drill as run_raw_loss  # lazy: loaded by its command only

        summary = run_raw_loss(workdir, ephemeral_instance=ctx.ephemeral_instance, log_level=ctx.log_level)
        signals = summary.pop("_text")
    else:
        from ..drills.incident_drills import run_incident_drill  # lazy: loaded by its command only

        summary = run_incident_drill(args.name, workdir, ephemeral_instance=ctx.ephemeral_instance,
                                     log_level=ctx.log_level)
        signals = summary.pop("_text")
    if ctx.as_json:
        print_json(summary)
    else:
        print(signals)
        print()
        for criterion, ok in summary["acceptance"].items():
            print(f"  [{'x' if ok else ' '}] {criterion}")
        print(f"\n{'PASSED' if summary['passed'] else 'FAILED'}; evidence in {workdir / 'artifacts'}")
    return 0 if summary["passed"] else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("drill", help=cmd_drill.__doc__, description=cmd_drill.__doc__)
    p.add_argument("name", choices=DRILLS, help="which drill")
    p.add_argument("--workdir", help="scratch folder (default <home>/drills/<name>; wiped first)")
    p.set_defaults(handler=cmd_drill)
