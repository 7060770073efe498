"""Cost per day against range length: does a longer range amortise? (PNG, drawn from benchmark results.)

One point per embedded ``dagster asset materialize`` scenario (the ``cli``
user path: one cold day, 30 days, a year, three years), ours against the
dagster-dbt peer and the pure-DuckDB reference, in seconds per day. A flat
line never amortises; a falling one does. ``run_benchmark`` draws it when a
run has two such scenarios; results measured one scenario at a time are
drawn with::

    python -m atlasmart_dagster.bench.cost_per_day OUT.png results.json [results.json ...]

(a scenario in a later file replaces the same scenario in an earlier one).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterable, Sequence

EMBEDDED_CLI = "cli"


def range_points(results: Iterable[dict]) -> list[dict]:
    """The embedded ``cli`` scenarios, by range length, with seconds per day for each side that ran."""
    by_days: dict[int, dict] = {}
    for r in results:
        if r.get("mode") != EMBEDDED_CLI or r.get("team"):
            continue
        days = r["partitions"]
        by_days[days] = {
            "days": days,
            "name": r["name"],
            "ours": r["ours_seconds"] / days if r.get("ours_seconds") else None,
            "peer": r["peer_seconds"] / days if r.get("peer_seconds") else None,
            "reference": r["reference_seconds"] / days if r.get("reference_seconds") else None,
            "peer_status": r.get("peer_status"),
        }
    return [by_days[d] for d in sorted(by_days)]


def merged_results(paths: Sequence[Path]) -> list[dict]:
    """Every scenario of the results files; a later file's scenario replaces an earlier one of the same name."""
    merged: dict[str, dict] = {}
    for path in paths:
        for r in json.loads(Path(path).read_text())["results"]:
            merged[r["name"]] = r
    return list(merged.values())


def cost_per_day_chart(results: Iterable[dict], path: Path) -> bool:
    """Draw the chart to ``path``; False without matplotlib or with fewer than two range lengths."""
    points = range_points(results)
    if len(points) < 2:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axis = plt.subplots(figsize=(8, 4.8))
    # each side's figures on its own side of the point, so the three do not overlap where the lines meet
    for key, label, marker, offset in (("ours", "AtlasMart on Dagster", "s-", (6, -3)),
                                       ("peer", "dagster-dbt peer", "^-", (6, 6)),
                                       ("reference", "pure DuckDB", "o-", (6, -10))):
        shown = [p for p in points if p[key] is not None]
        axis.plot([p["days"] for p in shown], [p[key] for p in shown], marker, label=label)
        for p in shown:
            axis.annotate(f"{p[key]:.2f}", (p["days"], p[key]), textcoords="offset points", xytext=offset, fontsize=7)
    for p in points:
        if p["peer"] is None and p["peer_status"]:
            axis.annotate(f"peer: {p['peer_status']}", (p["days"], p["ours"] or 0), textcoords="offset points",
                          xytext=(-40, -14), fontsize=7)
    axis.set_xscale("log")
    axis.set_xticks([p["days"] for p in points], [str(p["days"]) for p in points])
    axis.set_xlabel("days in one `dagster asset materialize --partition-range` (100k rows a day, embedded)")
    axis.set_ylabel("seconds per day (whole process, log scale)")
    axis.set_yscale("log")
    axis.legend(fontsize=8)
    axis.set_title("Cost per day against range length", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print("usage: python -m atlasmart_dagster.bench.cost_per_day OUT.png results.json [results.json ...]",
              file=sys.stderr)
        return 2
    out, files = Path(args[0]), [Path(a) for a in args[1:]]
    if not cost_per_day_chart(merged_results(files), out):
        print("cost_per_day: fewer than two embedded range lengths in those results (or no matplotlib)",
              file=sys.stderr)
        return 1
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
