"""The benchmark: our Dagster materialization against the pure-DuckDB limit, on the same data.

Each measurement runs in its own process (spawned), so peak RSS is the
process's own and nothing stays warm between measurements by accident.
"Warm" measurements first run a different day in the same process (imports,
definitions and the DuckDB engine loaded), then time the day that counts.
Every benchmarked run is checked against the generator's expected controls,
and the run must certify every day it built.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import platform as host
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from ..defs.partitions import FIRST_SALES_DATE
from ..domain.controls import ControlTuple
from .generator import generate
from .progress import Progress


@dataclass
class Scenario:
    name: str
    days: int
    rows: int
    mode: str  # "day" (warm, one partition), "range" (one run), "per_partition", "cli"
    target: float | None = None  # allowed ratio ours/reference
    description: str = ""


FULL = [
    Scenario("day_10k", 1, 10_000, "day", description="one 10k-row day, warm in-process"),
    Scenario("day_100k", 1, 100_000, "day", 2.5, "one 100k-row day, warm in-process"),
    Scenario("day_1m", 1, 1_000_000, "day", 1.5, "one 1M-row day"),
    Scenario("range_30x100k", 30, 100_000, "range", 1.5, "30 days x 100k, one run"),
    Scenario("range_365x100k", 365, 100_000, "range", 1.5, "365 days x 100k, one run"),
    Scenario("per_partition_30x100k", 30, 100_000, "per_partition", None, "30 days x 100k, one run per day"),
    Scenario("cli_materialize_100k", 1, 100_000, "cli", None, "`dagster asset materialize` one day, cold process (target <= 5 s wall)"),
]
QUICK = [
    Scenario("day_10k", 1, 10_000, "day", description="one 10k-row day, warm in-process"),
    Scenario("day_100k", 1, 100_000, "day", 2.5, "one 100k-row day, warm in-process"),
    Scenario("range_7x100k", 7, 100_000, "range", 1.5, "7 days x 100k, one run"),
    Scenario("per_partition_7x20k", 7, 20_000, "per_partition", None, "7 days x 20k, one run per day"),
]

def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reference_child(landing: str, days: list[str], out: str, queue) -> None:
    from .reference import run_reference

    result = run_reference(Path(landing), days, Path(out))
    queue.put({"seconds": result["seconds"], "peak_rss_mb": _peak_rss_mb(),
               "controls": {d: c.to_json() for d, c in result["controls"].items()}})


def _ours_child(landing: str, home: str, days: list[str], warm_day: str | None, mode: str, queue) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    import dagster as dg

    from ..definitions import build_definitions
    from ..defs.resources import AtlasmartResource
    from ..ops.runs import run_chain
    from ..product.published_controls import controls_of
    from ..product.run_certification import certify_run
    from ..store.tables import FACT_SALES

    resource_ = AtlasmartResource(home=home, landing=landing)
    defs = build_definitions(resource_)
    instance = dg.DagsterInstance.ephemeral()
    platform = resource_.platform
    if warm_day:
        run_chain(defs, instance, platform, [warm_day], lane="backfill", log_level="CRITICAL")
    started = time.perf_counter()
    outcomes = []
    if mode == "per_partition":
        for day in days:
            outcomes.append(run_chain(defs, instance, platform, [day], lane="backfill", log_level="CRITICAL", certify=False))
    else:
        outcomes.append(run_chain(defs, instance, platform, days, lane="backfill", log_level="CRITICAL", certify=False))
    run_seconds = time.perf_counter() - started
    certified = set()
    for outcome in outcomes:
        certified.update(d.partition for d in certify_run(platform, outcome.run_id, outcome.success) if d.certified)
    certify_seconds = time.perf_counter() - started - run_seconds
    controls = controls_of(platform.warehouse, FACT_SALES, days)
    queue.put({
        "seconds": run_seconds,
        "certify_seconds": certify_seconds,
        "peak_rss_mb": _peak_rss_mb(),
        "success": all(o.success for o in outcomes),
        "failures": [f for o in outcomes for f in o.failures][:3],
        "certified": len(certified),
        "runs": len(outcomes),
        "controls": {d: c.to_json() for d, c in controls.items()},
    })


def _in_child(target, *args, first_day: str = FIRST_SALES_DATE) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    process = ctx.Process(target=target, args=(*args, queue))
    # the partitions definition is built at import, so the child must inherit the setting at start
    previous = os.environ.get("ATLASMART_FIRST_SALES_DATE")
    os.environ["ATLASMART_FIRST_SALES_DATE"] = first_day
    try:
        process.start()
    finally:
        if previous is None:
            os.environ.pop("ATLASMART_FIRST_SALES_DATE")
        else:
            os.environ["ATLASMART_FIRST_SALES_DATE"] = previous
    result = queue.get(timeout=7200)
    process.join(timeout=60)
    return result


def _cli_materialize(landing: Path, home: Path, day: str) -> dict:
    """`dagster asset materialize` of one partition from a cold process (the instance prepared beforehand)."""
    dagster_home = home / "dagster"
    dagster_home.mkdir(parents=True, exist_ok=True)
    from ..defs.automation.jobs import DAILY_CHAIN  # imported here: keeps jobs/checks out of spawned reference children
    from ..store.dagster_instance import packaged_instance_config

    (dagster_home / "dagster.yaml").write_text(packaged_instance_config().read_text())
    env = {**os.environ, "ATLASMART_HOME": str(home), "ATLASMART_LANDING": str(landing), "DAGSTER_HOME": str(dagster_home),
           "ATLASMART_FIRST_SALES_DATE": min(day, FIRST_SALES_DATE)}
    command = [str(Path(sys.executable).parent / "dagster"), "asset", "materialize", "-m", "atlasmart_dagster",
               "--select", ",".join(DAILY_CHAIN), "--partition", day]
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    return {"seconds": wall, "success": result.returncode == 0, "failures": [result.stderr[-500:]] if result.returncode else []}


def _first_day(days: int) -> str:
    """The product's first day, or earlier when that many past days do not exist yet (a year-long range)."""
    latest_start = date.today() - timedelta(days=days + 1)
    return min(FIRST_SALES_DATE, latest_start.isoformat())


def _check(expected: dict, controls: dict[str, dict], days: list[str]) -> bool:
    return all(ControlTuple.from_mapping(controls.get(d, {})) == ControlTuple.from_mapping(expected["days"][d]["controls"])
               for d in days)


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    import dagster
    import duckdb
    import pyarrow
    import pyiceberg

    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": mem_gb, "python": host.python_version(),
            "dagster": dagster.__version__, "duckdb": duckdb.__version__, "pyiceberg": pyiceberg.__version__,
            "pyarrow": pyarrow.__version__, "platform": host.platform()}


def run_benchmark(workdir: Path, out: Path, quick: bool = False, show_progress: bool | None = None) -> dict:
    scenarios = QUICK if quick else FULL
    workdir.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    datasets: dict[tuple[int, int], tuple[Path, dict]] = {}
    results = []
    progress = Progress("bench", len(scenarios), enabled=show_progress)
    total_rows = 0
    for n, scenario in enumerate(scenarios):
        days_needed = scenario.days + (1 if scenario.mode == "day" else 0)
        key = (scenario.rows, days_needed)
        # the largest dataset of a row size serves every scenario of that size
        reuse = next((v for (rows, days), v in datasets.items() if rows == scenario.rows and days >= days_needed), None)
        if reuse is None:
            folder = workdir / f"data_{scenario.rows}x{days_needed}"
            gen_progress = Progress(f"generate {scenario.rows:,} x {days_needed}", days_needed, enabled=show_progress)
            expected = generate(folder, days_needed, scenario.rows, start=_first_day(days_needed),
                                progress=lambda d, t, r: gen_progress.update(d, r))
            gen_progress.done(days_needed * scenario.rows)
            datasets[key] = reuse = (folder, expected)
        folder, expected = reuse
        all_days = sorted(expected["days"])
        if scenario.mode == "day":
            warm, days = all_days[0], [all_days[1]]
        else:
            warm, days = None, all_days[: scenario.days]
        rows = scenario.rows * len(days)
        home = workdir / f"home_{scenario.name}"
        if home.exists():
            import shutil

            shutil.rmtree(home)
        reference = _in_child(_reference_child, str(folder / "landing"), days, str(workdir / f"ref_{scenario.name}"))
        if scenario.mode == "cli":
            ours = _cli_materialize(folder / "landing", home, days[0])
            ours_ok = ours["success"]
        else:
            ours = _in_child(_ours_child, str(folder / "landing"), str(home), days, warm, scenario.mode,
                             first_day=min(all_days[0], FIRST_SALES_DATE))
            ours_ok = ours["success"] and ours["certified"] == len(days) and _check(expected, ours["controls"], days)
        ratio = ours["seconds"] / reference["seconds"] if reference["seconds"] else None
        results.append({
            **asdict(scenario),
            "partitions": len(days),
            "total_rows": rows,
            "reference_seconds": round(reference["seconds"], 3),
            "reference_peak_rss_mb": round(reference["peak_rss_mb"]),
            "reference_correct": _check(expected, reference["controls"], days),
            "ours_seconds": round(ours["seconds"], 3),
            "ours_certify_seconds": round(ours.get("certify_seconds", 0.0), 3),
            "ours_peak_rss_mb": round(ours.get("peak_rss_mb", 0)) or None,
            "ours_runs": ours.get("runs", 1),
            "ours_correct": ours_ok,
            "failures": ours.get("failures", []),
            "ratio": round(ratio, 2) if ratio else None,
            "seconds_per_partition": round(ours["seconds"] / len(days), 3),
            "rows_per_second": round(rows / ours["seconds"]),
            "reference_rows_per_second": round(rows / reference["seconds"]),
            "met": None if scenario.target is None else bool(ratio is not None and ratio <= scenario.target),
        })
        total_rows += rows
        progress.update(n + 1, total_rows, force=True)
    progress.done(total_rows)
    report = {"machine": machine(), "quick": quick, "results": results,
              "all_correct": all(r["ours_correct"] and r["reference_correct"] for r in results)}
    (out / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "RESULTS.md").write_text(markdown(report))
    chart(report, out / "chart.png")
    return report


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# AtlasMart benchmark" + (" (quick)" if report["quick"] else ""),
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB RAM; Python {m['python']}, Dagster "
        f"{m['dagster']}, DuckDB {m['duckdb']}, pyiceberg {m['pyiceberg']}, pyarrow {m['pyarrow']}.",
        "",
        "Reference: pure DuckDB (gate -> fact -> agg -> controls -> fingerprint, Parquet out, no orchestration). "
        "Ours: the Dagster run of the whole chain (raw -> staging + quarantine -> fact -> agg -> metric -> marts, "
        "with every check, Iceberg commits and the ledger); certification after the run is shown separately. "
        "Every run is checked against the generator's expected controls.",
        "",
        "| scenario | partitions | rows | reference s | ours s | ratio | target | met | ours rows/s | s/partition "
        "| certify s | peak RSS ref / ours MB | correct |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {r['name']} | {r['partitions']} | {r['total_rows']:,} | {r['reference_seconds']} | {r['ours_seconds']} "
            f"| {r['ratio']} | {r['target'] or '-'} | {'yes' if r['met'] else ('-' if r['met'] is None else 'no')} "
            f"| {r['rows_per_second']:,} | {r['seconds_per_partition']} | {r['ours_certify_seconds']} "
            f"| {r['reference_peak_rss_mb']} / {r['ours_peak_rss_mb'] or '-'} | {'yes' if r['ours_correct'] and r['reference_correct'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def chart(report: dict, path: Path) -> bool:
    """Time per partition and peak memory against rows (PNG); False if matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    results = [r for r in report["results"] if r["mode"] != "cli"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [r["name"] for r in results]
    x = range(len(results))
    left.bar([i - 0.2 for i in x], [r["reference_seconds"] / r["partitions"] for r in results], 0.4, label="pure DuckDB")
    left.bar([i + 0.2 for i in x], [r["seconds_per_partition"] for r in results], 0.4, label="AtlasMart on Dagster")
    left.set_xticks(list(x), names, rotation=30, ha="right", fontsize=8)
    left.set_ylabel("seconds per partition")
    left.set_yscale("log")
    left.legend()
    right.plot([r["total_rows"] for r in results], [r["reference_peak_rss_mb"] for r in results], "o", label="pure DuckDB")
    right.plot([r["total_rows"] for r in results], [r["ours_peak_rss_mb"] or 0 for r in results], "s", label="AtlasMart")
    right.set_xscale("log")
    right.set_xlabel("rows in the scenario")
    right.set_ylabel("peak RSS (MB)")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


__all__ = ["run_benchmark", "FULL", "QUICK", "Scenario"]
