"""The benchmark: our Dagster materialization against the pure-DuckDB limit and a dagster-dbt peer, on the same data.

Three implementations of the chain run on each generated landing zone: the
pure-DuckDB reference (the floor), ours, and the peer (the same pipeline as
a dbt project on dbt-duckdb, orchestrated by dagster-dbt, ``peer.py``).
Each measurement runs in its own process (spawned), so peak RSS is the
process's own and nothing stays warm between measurements by accident.
"Warm" measurements first run a different day in the same process (imports,
definitions and the DuckDB engine loaded), then time the day that counts.
A scenario is measured ``repeats`` times, the implementations interleaved
(ours before the peer, then the peer before ours), and reports medians.
Every benchmarked run is checked against the generator's expected controls;
our run must certify every day it built. The peer is imported only when a
scenario runs it, and reported as not installed without the ``bench`` extra.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import platform as host
import queue as queue_module
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from ..defs.partitions import FIRST_SALES_DATE
from ..domain.controls import ControlTuple
from ..errors import UsageError
from .cost_per_day import cost_per_day_chart
from .generator import generate
from .progress import Progress


@dataclass
class Scenario:
    name: str
    days: int
    rows: int
    mode: str  # "day" (warm, one partition), "range" (one run), "per_partition"; user paths: "cli", "daemon"
    target: float | None = None  # allowed ratio ours/reference
    description: str = ""
    peer_target: float | None = None  # allowed ratio ours/peer
    peer: bool = True  # also run the dagster-dbt peer
    repeats: int = 3  # measurements per implementation; the table shows medians
    team: bool = False  # user paths: on the team instance (Postgres) instead of the embedded one (SQLite)


# Whole processes on a real instance (bench/user_paths.py): the headline of RESULTS.md.
USER_PATHS = ("cli", "daemon")


FULL = [
    # The user's own commands on the real instances: the headline.
    Scenario("cli_materialize_100k", 1, 100_000, "cli", None,
             "`dagster asset materialize` one day, cold process, embedded instance", peer_target=0.3),
    Scenario("cli_range_30x100k", 30, 100_000, "cli", None,
             "`dagster asset materialize --partition-range` 30 days, embedded instance", peer_target=0.5),
    Scenario("daemon_range_30x100k", 30, 100_000, "daemon", None,
             "the UI's path: an asset backfill of 30 days run by dagster-daemon, embedded instance", peer_target=0.6,
             repeats=2),
    Scenario("team_cli_range_30x100k", 30, 100_000, "cli", None,
             "`dagster asset materialize --partition-range` 30 days, team instance (Postgres)", peer_target=0.7,
             team=True, repeats=2),
    Scenario("team_daemon_range_30x100k", 30, 100_000, "daemon", None,
             "the UI's path on the team instance (Postgres): asset backfill of 30 days by dagster-daemon",
             peer_target=0.7, team=True, repeats=2),
    Scenario("cli_range_365x100k", 365, 100_000, "cli", 1.5,
             "`dagster asset materialize --partition-range` 365 days, embedded instance", peer_target=0.7, repeats=2),
    # Three years: does the cost per day stay flat (cost_per_day.png)? The peer may not fit in memory.
    Scenario("cli_range_1095x100k", 1095, 100_000, "cli", 1.5,
             "`dagster asset materialize --partition-range` 1,095 days, embedded instance", peer_target=0.7, repeats=1),
    # In-process breakdown (DagsterInstance.ephemeral(): no instance storage cost; not what users run).
    Scenario("day_10k", 1, 10_000, "day", description="one 10k-row day, warm in-process"),
    Scenario("day_100k", 1, 100_000, "day", 2.5, "one 100k-row day, warm in-process", peer_target=0.2),
    Scenario("day_1m", 1, 1_000_000, "day", 1.5, "one 1M-row day", peer_target=0.5),
    Scenario("range_30x100k", 30, 100_000, "range", 1.5, "30 days x 100k, one run, in-process", peer_target=0.5),
    Scenario("per_partition_30x100k", 30, 100_000, "per_partition", None, "30 days x 100k, one run per day"),
]
# Under two minutes on two cores: one measurement each, the peer on the user's own command only.
QUICK = [
    Scenario("day_10k", 1, 10_000, "day", description="one 10k-row day, warm in-process", peer=False, repeats=1),
    Scenario("day_100k", 1, 100_000, "day", 2.5, "one 100k-row day, warm in-process", peer=False, repeats=1),
    Scenario("range_7x100k", 7, 100_000, "range", 1.5, "7 days x 100k, one run", peer=False, repeats=1),
    Scenario("per_partition_5x20k", 5, 20_000, "per_partition", None, "5 days x 20k, one run per day",
             peer=False, repeats=1),
    # One pair on the user's own command, so a regression of the real instance's cost shows in --quick.
    Scenario("cli_range_5x20k", 5, 20_000, "cli", None,
             "`dagster asset materialize --partition-range` 5 days, embedded instance", peer_target=0.5, repeats=1),
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
    from ..ops.runs.chains import run_chain
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


def _peer_child(landing: str, workdir: str, target_dir: str, days: list[str], warm_day: str | None, mode: str,
                first_day: str, queue) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    sys.stdout = open(os.devnull, "w")  # dagster-dbt echoes every dbt log line to stdout
    from .peer import run_peer

    result = run_peer(Path(workdir), Path(landing), days, first_day, Path(target_dir), warm_day=warm_day,
                      mode="per_partition" if mode == "per_partition" else "range")
    # the dbt build runs in a subprocess: the larger of this process and its largest child
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    queue.put({**result, "peak_rss_mb": max(_peak_rss_mb(), children)})


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
    deadline = time.monotonic() + 7200
    while True:
        try:
            result = queue.get(timeout=5)
            break
        except queue_module.Empty:
            if not process.is_alive() or time.monotonic() > deadline:
                # killed (out of memory) or hung: report it instead of waiting for a result that never comes
                process.kill()
                raise ChildDied(f"{target.__name__} ended without a result (exit code {process.exitcode})")
    process.join(timeout=60)
    return result


class ChildDied(RuntimeError):
    """A measured process ended (or hung) without reporting a result."""


def _team_database(scenario: Scenario, prefix: str):
    """A scratch Postgres database for a team scenario (dropped after the measurement), else nothing."""
    from contextlib import nullcontext

    from .user_paths import scratch_postgres

    return scratch_postgres(prefix) if scenario.team else nullcontext(None)


def _user_path_ours(scenario: Scenario, landing: Path, home: Path, days: list[str], first_day: str,
                    team_url: str | None) -> dict:
    from ..store.tables import DAILY_CHAIN  # here, as SERVED_ASSETS: not in spawned children
    from ..defs.assets.served import SERVED_ASSETS
    from . import user_paths

    env = user_paths.ours_environment(landing, home, first_day, team_url)
    if scenario.mode == "cli":
        return user_paths.cli_ours(env, DAILY_CHAIN, days)
    ours = user_paths.daemon_backfill(env, user_paths.OURS_MODULE, DAILY_CHAIN, days, served=SERVED_ASSETS)
    controls = user_paths.served_controls(env)
    # the ledger's time to certified, as the UI shows it: every day served
    return {**ours, "controls": controls, "certified": len(controls),
            "certify_seconds": (ours["certified_seconds"] - ours["seconds"]) if ours.get("certified_seconds") else 0.0}


def _user_path_peer(scenario: Scenario, landing: Path, workdir: Path, target: Path, days: list[str], first_day: str,
                    team_url: str | None) -> dict:
    from . import user_paths
    from .peer import DUCKDB_ENV, peer_environment, read_controls

    peer_env = peer_environment(workdir, landing, target)
    env = {**os.environ, **peer_env, "ATLASMART_FIRST_SALES_DATE": first_day,
           "DAGSTER_HOME": str(user_paths.peer_dagster_home(workdir, team_url))}
    if scenario.mode == "cli":
        peer = user_paths.cli_peer(env, days)
    else:
        peer = user_paths.daemon_backfill(env, user_paths.PEER_MODULE, None, days)
    controls = read_controls(peer_env[DUCKDB_ENV], days) if peer["success"] else {}
    return {**peer, "controls": {d: c.to_json() for d, c in controls.items()}}


def _prepare_peer(workdir: Path, landing: Path) -> tuple[Path | None, str]:
    """Parse the peer's dbt project once (its deployment step); (target folder, status) or (None, why not)."""
    from . import peer

    if not peer.installed():
        return None, peer.NOT_INSTALLED
    target = workdir / "peer_target"
    target.mkdir(parents=True, exist_ok=True)
    with peer.environment(peer.peer_environment(workdir / "peer_prepare", landing, target)):
        peer.prepare(target)
    return target, "ran"


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


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

    from importlib import metadata

    peer_versions = {}
    for key, dist in (("dagster_dbt", "dagster-dbt"), ("dbt_core", "dbt-core"), ("dbt_duckdb", "dbt-duckdb")):
        try:
            peer_versions[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            peer_versions[key] = None
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": mem_gb, "python": host.python_version(),
            "dagster": dagster.__version__, "duckdb": duckdb.__version__, "pyiceberg": pyiceberg.__version__,
            "pyarrow": pyarrow.__version__, "platform": host.platform(), **peer_versions}


def _measure_ours(scenario: Scenario, landing: Path, home: Path, days: list[str], warm: str | None,
                  first_day: str, expected: dict) -> dict:
    if home.exists():
        shutil.rmtree(home)
    if scenario.mode in USER_PATHS:
        with _team_database(scenario, "bench_ours") as url:
            ours = _user_path_ours(scenario, landing, home, days, first_day, url)
        return {**ours, "correct": ours["success"] and _check(expected, ours["controls"], days)}
    ours = _in_child(_ours_child, str(landing), str(home), days, warm, scenario.mode, first_day=first_day)
    return {**ours, "correct": ours["success"] and ours["certified"] == len(days) and _check(expected, ours["controls"], days)}


def _measure_peer(scenario: Scenario, landing: Path, workdir: Path, target: Path, days: list[str], warm: str | None,
                  first_day: str, expected: dict) -> dict:
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    if scenario.mode in USER_PATHS:
        with _team_database(scenario, "bench_peer") as url:
            peer = _user_path_peer(scenario, landing, workdir, target, days, first_day, url)
    else:
        try:
            peer = _in_child(_peer_child, str(landing), str(workdir), str(target), days, warm, scenario.mode,
                             first_day, first_day=first_day)
        except ChildDied as died:
            peer = {"seconds": 0.0, "success": False, "failures": [str(died)], "runs": 0, "controls": {}}
    return {**peer, "correct": peer["success"] and _check(expected, peer["controls"], days)}


def run_benchmark(workdir: Path, out: Path, quick: bool = False, show_progress: bool | None = None,
                  repeats: int | None = None, with_peer: bool = True, only: list[str] | None = None) -> dict:
    """Run the scenarios; write results.json, RESULTS.md and chart.png to ``out``; return the report.

    ``repeats`` overrides every scenario's number of measurements;
    ``with_peer=False`` leaves the dagster-dbt peer out; ``only`` names the scenarios to run.
    """
    scenarios = QUICK if quick else FULL
    if only:
        known = {sc.name: sc for sc in FULL + QUICK}
        unknown = sorted(set(only) - set(known))
        if unknown:
            raise UsageError(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        scenarios = [known[name] for name in only]
    workdir.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    datasets: dict[tuple[int, int], tuple[Path, dict]] = {}
    results = []
    progress = Progress("bench", len(scenarios), enabled=show_progress)
    total_rows = 0
    peer_target: Path | None = None
    peer_status = "not run (--no-peer)" if not with_peer else ""
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
        landing = folder / "landing"
        all_days = sorted(expected["days"])
        if scenario.mode == "day":
            warm, days = all_days[0], [all_days[1]]
        else:
            warm, days = None, all_days[: scenario.days]
        first_day = min(all_days[0], FIRST_SALES_DATE)
        rows = scenario.rows * len(days)
        run_peer = with_peer and scenario.peer
        if run_peer and not peer_status:
            peer_target, peer_status = _prepare_peer(workdir, landing)
        run_peer = run_peer and peer_target is not None
        references, ours_runs, peer_runs = [], [], []
        for rep in range(repeats or scenario.repeats):
            references.append(_in_child(_reference_child, str(landing), days, str(workdir / f"ref_{scenario.name}")))
            measure_ours = lambda: ours_runs.append(  # noqa: E731
                _measure_ours(scenario, landing, workdir / f"home_{scenario.name}_{rep}", days, warm, first_day, expected))
            measure_peer = lambda: peer_runs.append(  # noqa: E731
                _measure_peer(scenario, landing, workdir / f"peer_{scenario.name}_{rep}", peer_target, days, warm,
                              first_day, expected))
            # A/B interleaved: ours first on even repeats, the peer first on odd ones
            order = [measure_ours, measure_peer] if rep % 2 == 0 else [measure_peer, measure_ours]
            for measure in order if run_peer else [measure_ours]:
                measure()
        reference_s = _median([r["seconds"] for r in references])
        ours_s = _median([r["seconds"] for r in ours_runs])
        ratio = ours_s / reference_s if reference_s else None
        result = {
            **asdict(scenario),
            "repeats": len(ours_runs),
            "partitions": len(days),
            "total_rows": rows,
            "reference_seconds": round(reference_s, 3),
            "reference_seconds_runs": [round(r["seconds"], 3) for r in references],
            "reference_peak_rss_mb": round(max(r["peak_rss_mb"] for r in references)),
            "reference_correct": all(_check(expected, r["controls"], days) for r in references),
            "ours_seconds": round(ours_s, 3),
            "ours_seconds_runs": [round(r["seconds"], 3) for r in ours_runs],
            "ours_certify_seconds": round(_median([r.get("certify_seconds", 0.0) for r in ours_runs]), 3),
            "ours_time_to_certified": round(_median([r["seconds"] + r.get("certify_seconds", 0.0) for r in ours_runs]), 3),
            "ours_run_seconds": round(_median([r.get("run_seconds", r["seconds"]) for r in ours_runs]), 3),
            "ours_loads": [r.get("load") for r in ours_runs],
            "peer_loads": [r.get("load") for r in peer_runs],
            "events_per_partition": ours_runs[0].get("events_per_partition"),
            "ours_peak_rss_mb": round(max(r.get("peak_rss_mb", 0) for r in ours_runs)) or None,
            "ours_runs": ours_runs[0].get("runs", 1),
            "ours_correct": all(r["correct"] for r in ours_runs),
            "failures": [f for r in ours_runs for f in r.get("failures", [])][:3],
            "ratio": round(ratio, 2) if ratio else None,
            "seconds_per_partition": round(ours_s / len(days), 3),
            "rows_per_second": round(rows / ours_s),
            "reference_rows_per_second": round(rows / reference_s),
            "met": _met(ratio, scenario.target),
            **_peer_result(scenario, peer_runs, ours_s, rows, len(days),
                           peer_status if scenario.peer else "not run in this scenario"),
        }
        results.append(result)
        total_rows += rows
        progress.update(n + 1, total_rows, force=True)
    progress.done(total_rows)
    report = {"machine": machine(), "quick": quick, "results": results,
              "peer": peer_status or "not run in these scenarios",
              "all_correct": all(r["ours_correct"] and r["reference_correct"] and r["peer_correct"] is not False
                                 for r in results)}
    write_report(report, out)
    return report


def write_report(report: dict, out: Path) -> None:
    """results.json, RESULTS.md (with out/CHANGES.md, what each change bought, kept by hand) and the charts."""
    (out / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    changes = out / "CHANGES.md"
    (out / "RESULTS.md").write_text(markdown({**report, "changes": changes.read_text() if changes.exists() else None}))
    chart(report, out / "chart.png")
    cost_per_day_chart(report["results"], out / "cost_per_day.png")


def _peer_result(scenario: Scenario, runs: list[dict], ours_seconds: float, rows: int, partitions: int,
                 status: str) -> dict:
    """The peer's columns of one scenario (None where the peer did not run, with the reason in peer_status)."""
    if not runs:
        return {"peer_status": status, "peer_seconds": None,
                "peer_seconds_runs": [], "peer_peak_rss_mb": None, "peer_runs": None, "peer_checks_passed": None,
                "peer_correct": None, "peer_failures": [], "peer_ratio": None, "peer_met": None,
                "peer_rows_per_second": None, "peer_seconds_per_partition": None}
    peer_s = _median([r["seconds"] for r in runs if r["success"]])  # a failed run's time means nothing
    ratio = ours_seconds / peer_s if peer_s else None
    return {
        "peer_status": "ran",
        "peer_seconds": round(peer_s, 3),
        "peer_seconds_runs": [round(r["seconds"], 3) for r in runs],
        "peer_peak_rss_mb": round(max(r.get("peak_rss_mb", 0) for r in runs)) or None,
        "peer_runs": runs[0].get("runs", 1),
        "peer_checks_passed": runs[0].get("checks_passed"),
        "peer_correct": all(r["correct"] for r in runs),
        "peer_failures": [f for r in runs for f in r.get("failures", [])][:3],
        "peer_ratio": round(ratio, 2) if ratio else None,
        "peer_met": _met(ratio, scenario.peer_target),
        "peer_rows_per_second": round(rows / peer_s) if peer_s else None,
        "peer_seconds_per_partition": round(peer_s / partitions, 3),
    }


def _yes_no(met: bool | None) -> str:
    return "yes" if met else ("-" if met is None else "no")


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# AtlasMart benchmark" + (" (quick)" if report["quick"] else ""),
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB RAM; Python {m['python']}, Dagster "
        f"{m['dagster']}, DuckDB {m['duckdb']}, pyiceberg {m['pyiceberg']}, pyarrow {m['pyarrow']}"
        + (f", dagster-dbt {m['dagster_dbt']}, dbt-core {m['dbt_core']}, dbt-duckdb {m['dbt_duckdb']}"
           if m.get("dagster_dbt") else "") + ".",
        "",
        *_user_paths_section(report),
        "## Every scenario against the pure-DuckDB reference",
        "",
        "Reference: pure DuckDB (gate -> fact -> agg -> controls -> fingerprint, Parquet out, no orchestration). "
        "Ours: the Dagster run of the whole chain (raw -> staging + quarantine -> fact -> agg -> metric -> marts, "
        "with every check, Iceberg commits and the ledger); certification after the run is shown separately. "
        "Peer: the same chain as a dbt project on dbt-duckdb run by dagster-dbt (`@dbt_assets` over daily "
        "partitions, `dbt build --vars` with the window, dbt tests as asset checks, tables in one DuckDB file; "
        "no raw store, Iceberg, ledger or certification). "
        "Seconds are medians of the repeats, the implementations interleaved in each repeat. "
        "Every run is checked against the generator's expected controls.",
        "",
        "| scenario | partitions | rows | repeats | reference s | ours s | ratio | target | met | ours rows/s | s/partition "
        "| certify s | peak RSS ref / ours MB | correct |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {r['name']} | {r['partitions']} | {r['total_rows']:,} | {r['repeats']} | {r['reference_seconds']} "
            f"| {r['ours_seconds']} | {r['ratio']} | {r['target'] or '-'} | {_yes_no(r['met'])} "
            f"| {r['rows_per_second']:,} | {r['seconds_per_partition']} | {r['ours_certify_seconds']} "
            f"| {r['reference_peak_rss_mb']} / {r['ours_peak_rss_mb'] or '-'} "
            f"| {'yes' if r['ours_correct'] and r['reference_correct'] else 'NO'} |"
        )
    lines += [
        "",
        "## Ours against the dagster-dbt peer",
        "",
        "Ratio is ours / peer (below 1: ours is faster). The peer's peak RSS is its Dagster process or its dbt "
        "subprocess, whichever is larger.",
        "",
        "| scenario | peer s | ours s | ours / peer | target | met | peer rows/s | peer s/partition "
        "| peer peak RSS MB | dbt tests passed | peer correct |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        if r["peer_seconds"] is None:
            lines.append(f"| {r['name']} | {r['peer_status']} | {r['ours_seconds']} | - "
                         f"| {r['peer_target'] or '-'} | - | - | - | - | - | - |")
            continue
        lines.append(
            f"| {r['name']} | {r['peer_seconds']} | {r['ours_seconds']} | {r['peer_ratio']} | {r['peer_target'] or '-'} "
            f"| {_yes_no(r['peer_met'])} | {r['peer_rows_per_second']:,} | {r['peer_seconds_per_partition']} "
            f"| {r['peer_peak_rss_mb'] or '-'} | {r['peer_checks_passed'] if r['peer_checks_passed'] is not None else '-'} "
            f"| {'yes' if r['peer_correct'] else 'NO'} |"
        )
    changes = report.get("changes")
    if changes:
        lines += ["", changes.strip()]
    return "\n".join(lines) + "\n"


def _user_paths_section(report: dict) -> list[str]:
    """The headline: the user's own commands as whole processes on a real instance, against the peer's."""
    user = [r for r in report["results"] if r["mode"] in USER_PATHS]
    if not user:
        return []
    lines = [
        "## The user's own commands (headline)",
        "",
        "Whole processes on a real instance, as users run them (`atlasmart_dagster/bench/user_paths.py`): `cli` is "
        "`dagster asset materialize` from a cold process; `daemon` is what the UI's *Materialize* of a range does, "
        "an asset backfill that `dagster-daemon` (already beating) runs through the run queue. *embedded* is the "
        "SQLite instance `atlasmart dagster-home` prepares, *team* the Postgres one (a scratch database). The peer "
        "runs the same command on its own instance of the same kind. Time to certified: run start -> every day "
        "CERTIFIED and served (`cli`: the run plus `atlasmart certify --run`; `daemon`: until certification_sensor "
        "has served every day). Load is the 1-minute load average before each measurement (ours; peer).",
        "",
        "| scenario | instance | days | ours s | peer s | ours / peer | target | met | time to certified s "
        "| certified / run | events per day | peak RSS ours / peer MB | load | correct |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in user:
        share = round(r["ours_time_to_certified"] / r["ours_seconds"], 2) if r["ours_seconds"] else "-"
        loads = ", ".join(f"{v:.1f}" for v in r["ours_loads"] if v is not None) + "; " + ", ".join(
            f"{v:.1f}" for v in r["peer_loads"] if v is not None)
        correct = r["ours_correct"] and r["peer_correct"] is not False
        lines.append(
            f"| {r['name']} | {'team' if r.get('team') else 'embedded'} | {r['partitions']} | {r['ours_seconds']} "
            f"| {r['peer_seconds'] if r['peer_seconds'] is not None else r['peer_status']} | {_pair_ratios(r)} "
            f"| {r['peer_target'] or '-'} | {_yes_no(r['peer_met'])} | {r['ours_time_to_certified']} | {share} "
            f"| {r.get('events_per_partition') or '-'} | {r['ours_peak_rss_mb'] or '-'} / {r['peer_peak_rss_mb'] or '-'} "
            f"| {loads} | {'yes' if correct else 'NO'} |")
    return lines + [""]


def _met(ratio: float | None, target: float | None) -> bool | None:
    """A target's verdict: None without a target, False without a measured ratio."""
    return None if target is None else bool(ratio is not None and ratio <= target)


def _pair_ratios(result: dict) -> str:
    """The median ours / peer, then each interleaved pair's own ratio: one pair can hide behind a median."""
    if not result.get("peer_ratio"):
        return "-"
    pairs = [round(o / p, 2) for o, p in zip(result["ours_seconds_runs"], result["peer_seconds_runs"]) if p]
    return f"{result['peer_ratio']} ({', '.join(map(str, pairs))})" if len(pairs) > 1 else str(result["peer_ratio"])


def rejudge(report: dict) -> dict:
    """The report with every scenario's targets and verdicts as the scenarios define them now.

    Targets are policy and the seconds are measurements: when a target
    changes, the measured runs are judged again, not run again.
    """
    known = {sc.name: sc for sc in QUICK + FULL}
    results = []
    for r in report["results"]:
        scenario = known.get(r["name"])
        if scenario is not None:
            target, peer_target = scenario.target, scenario.peer_target
            r = {**r, "target": target, "peer_target": peer_target, "met": _met(r["ratio"], target),
                 "peer_met": _met(r["peer_ratio"], peer_target) if r["peer_status"] == "ran" else None}
        results.append(r)
    return {**report, "results": results}


def render(out: Path) -> None:
    """Write ``out``'s RESULTS.md and charts again from its results.json (re-judged) and CHANGES.md."""
    write_report(rejudge(json.loads((out / "results.json").read_text())), out)


def chart(report: dict, path: Path) -> bool:
    """Time per partition, both ratios (ours/reference, ours/peer) and peak memory (PNG); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    all_results = report["results"]
    results = [r for r in all_results if r["mode"] not in USER_PATHS]
    if not results:
        return _ratio_chart(all_results, path, plt)
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(16, 4.5))
    names = [r["name"] for r in results]
    x = list(range(len(results)))
    peer = [r["peer_seconds_per_partition"] or 0 for r in results]
    left.bar([i - 0.27 for i in x], [r["reference_seconds"] / r["partitions"] for r in results], 0.27, label="pure DuckDB")
    left.bar(x, [r["seconds_per_partition"] for r in results], 0.27, label="AtlasMart on Dagster")
    left.bar([i + 0.27 for i in x], peer, 0.27, label="dagster-dbt peer")
    left.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    left.set_ylabel("seconds per partition")
    left.set_yscale("log")
    left.legend(fontsize=8)
    rx = list(range(len(all_results)))
    # bars start at 1 (parity): up is slower than the other, down is faster
    for offset, key, label in ((-0.2, "ratio", "ours / pure DuckDB"), (0.2, "peer_ratio", "ours / peer")):
        shown = [(i + offset, r[key]) for i, r in enumerate(all_results) if r[key]]
        middle.bar([i for i, _ in shown], [v - 1 for _, v in shown], 0.4, bottom=1, label=label)
    for i, r in enumerate(all_results):
        if r["target"]:
            middle.plot([i - 0.4, i], [r["target"]] * 2, "k--", linewidth=1)
        if r["peer_target"]:
            middle.plot([i, i + 0.4], [r["peer_target"]] * 2, "k:", linewidth=1)
    middle.axhline(1.0, color="grey", linewidth=0.5)
    middle.set_xticks(rx, [r["name"] for r in all_results], rotation=30, ha="right", fontsize=8)
    middle.set_ylabel("time ratio (dashed/dotted: target)")
    middle.set_yscale("log")
    middle.legend(fontsize=8)
    right.plot([r["total_rows"] for r in results], [r["reference_peak_rss_mb"] for r in results], "o", label="pure DuckDB")
    right.plot([r["total_rows"] for r in results], [r["ours_peak_rss_mb"] or 0 for r in results], "s", label="AtlasMart")
    with_peer = [r for r in results if r["peer_peak_rss_mb"]]
    right.plot([r["total_rows"] for r in with_peer], [r["peer_peak_rss_mb"] for r in with_peer], "^", label="dagster-dbt peer")
    right.set_xscale("log")
    right.set_xlabel("rows in the scenario")
    right.set_ylabel("peak RSS (MB)")
    right.legend(fontsize=8)
    return _save(fig, path, plt)


def _save(fig, path: Path, plt) -> bool:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _ratio_chart(results: list[dict], path: Path, plt) -> bool:
    """Only user paths were run: ours / peer per scenario, against its target."""
    fig, axis = plt.subplots(figsize=(8, 4.5))
    shown = [r for r in results if r["peer_ratio"]]
    axis.bar(range(len(shown)), [r["peer_ratio"] - 1 for r in shown], 0.6, bottom=1, label="ours / peer")
    for i, r in enumerate(shown):
        if r["peer_target"]:
            axis.plot([i - 0.3, i + 0.3], [r["peer_target"]] * 2, "k:", linewidth=1)
    axis.axhline(1.0, color="grey", linewidth=0.5)
    axis.set_xticks(range(len(shown)), [r["name"] for r in shown], rotation=30, ha="right", fontsize=8)
    axis.set_ylabel("time ratio, ours / peer (dotted: target)")
    axis.legend(fontsize=8)
    return _save(fig, path, plt)


__all__ = ["run_benchmark", "FULL", "QUICK", "Scenario"]


if __name__ == "__main__":
    # python -m atlasmart_dagster.bench.runner render DIR: RESULTS.md again from DIR's results.json and CHANGES.md
    if sys.argv[1:2] != ["render"] or len(sys.argv) != 3:
        sys.exit("usage: python -m atlasmart_dagster.bench.runner render DIR")
    render(Path(sys.argv[2]))
