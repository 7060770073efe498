"""What publishing the ``certified`` branch adds to time to certified (issue 32): the user's commands, with and without it.

Usage (from a shell whose ``atlasmart`` is this checkout)::

    python -m atlasmart_dagster.bench.publish_cost measure --days 30 --rows 100000 --pairs 3 --workdir /tmp/pub
    python -m atlasmart_dagster.bench.publish_cost measure --data /tmp/gen --days 365 --pairs 1 --workdir /tmp/pub

Each measurement is what a user runs on a fresh embedded home, as whole
processes: ``dagster asset materialize --partition-range`` of the chain from a
cold process, then the certification of its run (``atlasmart certify --run``)
in a process of its own. Time to certified is the two processes' wall times
added (run start -> every day CERTIFIED and served), as in the benchmark's
headline (``user_paths.cli_ours``). Two arms, on the same generated data, A/B
interleaved (the order alternates from pair to pair). By default both arms of
a pair certify the same materialization (the home is copied aside after the
run and back before the second arm), so the pair differs in the certification
only, the one place the branch is published; a range run's wall time on
shared cores spreads by far more than the branch costs. ``--separate-runs``
materializes for each arm instead:

* **with the branch**: the certification is ``atlasmart certify`` exactly; its
  publish step (``certified_branch.converge``, which ``certify_run`` calls
  once the gate has decided) is also timed where it runs, inside that
  process, so the branch's own cost is read without the noise of two runs'
  difference (``publish_seconds``);
* **without the branch**: the same command in the same kind of process, but
  ``certify_run``'s call of ``converge`` does nothing: the ledger decides and
  the days are served, and no branch is written. It is the state a stop
  between a decision and its publish leaves, which the next certification or
  sensor tick repairs; the benchmark then publishes it by itself
  (``publish_later_seconds``), which checks that it converges and times the
  publish as a step of its own.

Why not a setting: the branch is a guarantee (any engine reads what is
served, in the table format's own terms), so the product has no switch that
turns it off. The "without" arm exists only here, inside the process this
module starts. Both arms are checked before their times count: every day's
served controls equal the generator's, the branch of every target holds every
day (with) or does not exist (without). A replacement that missed (``converge``
renamed or moved) fails that check instead of measuring the branch twice.

Whole-process wall times and peak memory come from ``/usr/bin/time``
(``user_paths.run_measured``); the machine's 1-minute load average is read
before each process.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

WITH, WITHOUT = "with branch", "without branch"
ARMS = (WITH, WITHOUT)
TARGET = 0.05  # issue 32: the branch adds at most 5 % to time to certified
MODULE = "atlasmart_dagster.bench.publish_cost"  # not __name__: that is "__main__" when run with -m


# -- inside the measured certification process ------------------------------------------------------------


def certify(run: str, with_branch: bool, record: Path) -> int:
    """``atlasmart --json certify --run RUN`` in this process; the publish step timed (or left out), written to ``record``."""
    from ..cli.main import main
    from ..product import certified_branch, run_certification

    if getattr(run_certification, "converge", None) is not certified_branch.converge:
        # certify_run no longer publishes through this name: measuring would time the branch in both arms
        raise SystemExit("certify_run does not call certified_branch.converge by that name any more: "
                         "update atlasmart_dagster/bench/publish_cost.py")
    publishes: list[float] = []  # one per call certify_run made: the seconds it took, or 0.0 left out

    def timed(platform, states=None):
        started = time.perf_counter()
        try:
            return certified_branch.converge(platform, states=states)
        finally:
            publishes.append(time.perf_counter() - started)

    def left_out(platform, states=None):
        publishes.append(0.0)  # counted, so the check sees certify_run reached its publish and skipped it
        return None

    run_certification.converge = timed if with_branch else left_out
    started = time.perf_counter()
    code = main(["--json", "certify", "--run", run])
    record.write_text(json.dumps({
        "branch": with_branch, "exit_code": code, "publish_calls": len(publishes),
        "publish_seconds": round(sum(publishes), 3) if with_branch else None,
        "command_seconds": round(time.perf_counter() - started, 3),
    }))
    return code


def publish_later(record: Path) -> int:
    """What the next certification or sensor tick does after a certification without the branch: publish it, timed."""
    from ..product.certified_branch import publish_certified
    from ..store.platform import Platform

    platform = Platform.open()
    started = time.perf_counter()
    report = publish_certified(platform)
    record.write_text(json.dumps({"publish_seconds": round(time.perf_counter() - started, 3),
                                  "tables": sorted(report)}))
    return 0


def branch_days() -> dict[str, list[str] | None]:
    """Per target table, the days its ``certified`` branch holds (None: no branch)."""
    from ..product.certified_branch import published, targets
    from ..store.platform import Platform

    platform = Platform.open()
    out = {}
    for target in targets():
        _, held = published(platform, target.spec)
        out[target.spec.name] = None if held is None else sorted(held)
    return out


# -- the benchmark's side -----------------------------------------------------------------------------------


def _module_command(*args: str) -> list[str]:
    return [sys.executable, "-m", MODULE, *args]


def materialize(landing: Path, home: Path, days: list[str], first_day: str) -> tuple[dict, dict[str, str], str | None]:
    """A fresh home, then ``dagster asset materialize`` of the chain over ``days``: (figures, environment, run id)."""
    from ..store.tables import DAILY_CHAIN
    from . import user_paths

    if home.exists():
        shutil.rmtree(home)
    env = user_paths.ours_environment(landing, home, first_day, None)
    result: dict = {"days": len(days), "load_materialize": user_paths.load_average()}
    code, _, err, wall, peak = user_paths.run_measured(
        [str(Path(sys.executable).parent / "dagster"), "asset", "materialize", "-m", user_paths.OURS_MODULE,
         "--select", ",".join(DAILY_CHAIN), *user_paths.partition_args(days)], env)
    result.update(materialize_seconds=round(wall, 3), materialize_peak_rss_mb=round(peak))
    run_id = re.search(r" - ([0-9a-f-]{36}) - .*RUN_SUCCESS", err)
    if code or not run_id:
        return {**result, "correct": False, "failure": err[-500:]}, env, None
    return result, env, run_id.group(1)


def certify_arm(arm: str, env: dict[str, str], run_id: str, days: list[str], expected: dict) -> dict:
    """Certify ``run_id`` with or without the branch, in a process of its own, timed; then check what it left."""
    from . import user_paths
    from .runner import _check

    home = Path(env["ATLASMART_HOME"])
    record = home / "bench-certify.json"
    result: dict = {"arm": arm, "load_certify": user_paths.load_average()}
    code, _, err, wall, peak = user_paths.run_measured(
        _module_command("certify", "--run", run_id, "--record", str(record),
                        *([] if arm == WITH else ["--without-branch"])), env)
    inside = json.loads(record.read_text()) if record.exists() else {}
    result.update(certify_seconds=round(wall, 3), certify_peak_rss_mb=round(peak),
                  publish_seconds=inside.get("publish_seconds"), publish_calls=inside.get("publish_calls"))
    if code or inside.get("exit_code") != 0:
        return {**result, "correct": False, "failure": err[-500:]}
    controls = user_paths.served_controls(env)
    held = _branch_days(env)
    if arm == WITH:
        branch_ok = inside.get("publish_calls", 0) >= 1 and all(h == days for h in held.values())
    else:
        branch_ok = inside.get("publish_calls", 0) >= 1 and all(h is None for h in held.values())
        later = home / "bench-publish.json"
        code, _, err, wall, _ = user_paths.run_measured(_module_command("publish-later", "--record", str(later)), env)
        result.update(publish_later_seconds=json.loads(later.read_text())["publish_seconds"] if not code else None,
                      publish_later_process_seconds=round(wall, 3))
        branch_ok = branch_ok and not code and all(h == days for h in _branch_days(env).values())
    return {**result, "certified": len(controls), "branch_ok": branch_ok,
            "correct": branch_ok and set(days) <= set(controls) and _check(expected, controls, days)}


def measure_pair(pair: int, landing: Path, workdir: Path, days: list[str], first_day: str, expected: dict,
                 shared: bool) -> list[dict]:
    """Both arms, in this pair's order; ``shared``: on one materialization (the home copied back between arms)."""
    arms = ARMS if pair % 2 == 0 else ARMS[::-1]
    home = workdir / f"home_{len(days)}_{pair}"
    runs = []
    if shared:
        made, env, run_id = materialize(landing, home, days, first_day)
        saved = workdir / f"saved_{len(days)}_{pair}"
        if run_id:
            shutil.rmtree(saved, ignore_errors=True)
            shutil.copytree(home, saved, symlinks=True)
        for n, arm in enumerate(arms):
            if run_id and n:  # the second arm certifies the same run from the same state
                shutil.rmtree(home)
                shutil.copytree(saved, home, symlinks=True)
            runs.append({"pair": pair, "arm": arm, **made,
                         **(certify_arm(arm, env, run_id, days, expected) if run_id else {})})
        shutil.rmtree(saved, ignore_errors=True)
    else:
        for arm in arms:
            made, env, run_id = materialize(landing, home, days, first_day)
            runs.append({"pair": pair, "arm": arm, **made,
                         **(certify_arm(arm, env, run_id, days, expected) if run_id else {})})
    for r in runs:
        if "certify_seconds" in r:
            r["time_to_certified_seconds"] = round(r["materialize_seconds"] + r["certify_seconds"], 3)
    shutil.rmtree(home, ignore_errors=True)  # a year's home is gigabytes; the figures are kept
    return runs


def _branch_days(env: dict[str, str]) -> dict[str, list[str] | None]:
    done = subprocess.run(_module_command("branch-days"), env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"reading the certified branch failed: {done.stderr[-500:]}")
    return json.loads(done.stdout)


def summarize(runs: list[dict]) -> dict:
    """Medians per arm, the difference of the arms, and the publish step's share of time to certified."""
    def median(arm: str, key: str) -> float | None:
        values = [r[key] for r in runs if r["arm"] == arm and r.get(key) is not None]
        return round(statistics.median(values), 3) if values else None

    with_s, without_s = median(WITH, "time_to_certified_seconds"), median(WITHOUT, "time_to_certified_seconds")
    publish_s = median(WITH, "publish_seconds")
    shares = [r["publish_seconds"] / r["time_to_certified_seconds"] for r in runs
              if r["arm"] == WITH and r.get("publish_seconds") is not None]
    share = round(statistics.median(shares), 4) if shares else None
    by_pair: dict[int, dict[str, float]] = {}
    for r in runs:
        if r.get("certify_seconds") is not None:
            by_pair.setdefault(r["pair"], {})[r["arm"]] = r["certify_seconds"]
    certify_differences = [p[WITH] - p[WITHOUT] for p in by_pair.values() if len(p) == 2]
    return {
        "time_to_certified_with": with_s, "time_to_certified_without": without_s,
        "difference_seconds": round(with_s - without_s, 3) if with_s and without_s else None,
        "difference_share": round((with_s - without_s) / without_s, 4) if with_s and without_s else None,
        "certify_difference_seconds": round(statistics.median(certify_differences), 3) if certify_differences else None,
        "publish_seconds": publish_s, "publish_share": share,
        "publish_later_seconds": median(WITHOUT, "publish_later_seconds"),
        "target": TARGET, "met": None if share is None else share <= TARGET,
        "all_correct": bool(runs) and all(r["correct"] for r in runs),
    }


def measure(workdir: Path, days: int, rows: int, pairs: int, data: Path | None = None, shared: bool = True,
            first_pair: int = 0) -> dict:
    """``pairs`` interleaved pairs of arms over the first ``days`` days of ``data`` (generated when None).

    ``shared``: both arms of a pair certify one materialization (the home is
    copied back between them), so their difference is the certification's
    alone; else each arm materializes on its own fresh home. ``first_pair``
    numbers the pairs on from an earlier invocation, so the order keeps
    alternating (an odd pair runs without the branch first).
    """
    from ..defs.partitions import FIRST_SALES_DATE
    from .generator import generate
    from .runner import _first_day, machine

    workdir.mkdir(parents=True, exist_ok=True)
    if data is None:
        data = workdir / f"data_{rows}x{days}"
        if not (data / "expected.json").exists():
            generate(data, days, rows, start=_first_day(days))
    expected = json.loads((data / "expected.json").read_text())
    all_days = sorted(expected["days"])
    if len(all_days) < days:
        raise SystemExit(f"{data} holds {len(all_days)} days, fewer than --days {days}")
    chosen = all_days[:days]
    first_day = min(all_days[0], FIRST_SALES_DATE)
    runs = []
    for pair in range(first_pair, first_pair + pairs):
        for r in measure_pair(pair, data / "landing", workdir, chosen, first_day, expected, shared):
            runs.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    rows_per_day = expected["days"][chosen[0]]["rows"]
    return {"machine": machine(), "days": days, "rows_per_day": rows_per_day, "pairs": pairs, "runs": runs,
            "shared_materialization": shared, **summarize(runs)}


def merge(reports: list[dict]) -> dict:
    """Several invocations' reports of one size (``--first-pair`` going on) as one: their runs, summarized anew."""
    if len({(r["days"], r["rows_per_day"], r.get("shared_materialization")) for r in reports}) != 1:
        raise SystemExit("the reports differ in days, rows per day or pairing: merge only one kind")
    runs = [run for r in reports for run in r["runs"]]
    if len({run["pair"] for run in runs}) * 2 != len(runs):
        raise SystemExit("the reports repeat a pair number: go on with --first-pair")
    return {**reports[0], "pairs": len(runs) // 2, "runs": runs, **summarize(runs)}


def markdown(report: dict) -> str:
    """One row per measured process pair, then the medians: the table bench/RESULTS.md keeps."""
    pairing = ("both arms of a pair certify one materialization" if report.get("shared_materialization")
               else "each arm materializes on its own home")
    lines = [f"Pairs: {pairing}; the order alternates from pair to pair.", "",
             "| days × rows | pair | arm | materialize s | certify s | time to certified s | publish step s "
             "| publish later s | load (materialize; certify) | correct |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["runs"]:
        lines.append(
            f"| {report['days']} × {report['rows_per_day']:,} | {r['pair'] + 1} | {r['arm']} | {r.get('materialize_seconds')} "
            f"| {r.get('certify_seconds', '-')} | {r.get('time_to_certified_seconds', '-')} "
            f"| {r.get('publish_seconds') or '-'} | {r.get('publish_later_seconds') or '-'} "
            f"| {r.get('load_materialize')}; {r.get('load_certify', '-')} | {'yes' if r['correct'] else 'NO'} |")
    share, diff = report["publish_share"], report["difference_share"]
    lines += ["", f"Medians: time to certified {report['time_to_certified_with']} s with the branch, "
              f"{report['time_to_certified_without']} s without (difference {report['difference_seconds']} s, "
              f"{'-' if diff is None else f'{diff:+.1%}'}; certification process with - without, per pair: "
              f"{report['certify_difference_seconds']} s); the publish step inside the run "
              f"{report['publish_seconds']} s, {'-' if share is None else f'{share:.1%}'} of time to certified "
              f"(target ≤ {TARGET:.0%}: {'met' if report['met'] else 'not met'})."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("measure", help="interleaved pairs of arms; JSON report on stdout (--markdown: the table)")
    p.add_argument("--days", type=int, required=True, help="days in the range (the first ones of --data)")
    p.add_argument("--rows", type=int, default=100_000, help="rows per day when the data is generated")
    p.add_argument("--pairs", type=int, default=1, help="pairs of (with, without), order alternating")
    p.add_argument("--first-pair", type=int, default=0,
                   help="number of the first pair, to go on from an earlier invocation (odd: without the branch first)")
    p.add_argument("--data", help="a folder `atlasmart generate` wrote (landing/, expected.json); default: generate")
    p.add_argument("--workdir", required=True, help="scratch folder for data and homes")
    p.add_argument("--separate-runs", action="store_true",
                   help="each arm materializes on its own home (default: a pair's arms certify one materialization)")
    p.add_argument("--out", help="also write the JSON report here")
    p.add_argument("--markdown", action="store_true", help="print the table for bench/RESULTS.md instead of JSON")
    p = sub.add_parser("table", help="the markdown table of one or more JSON reports of the same size, merged")
    p.add_argument("reports", nargs="+")
    p = sub.add_parser("certify", help="(inside a measurement) atlasmart certify, the publish step timed")
    p.add_argument("--run", required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--without-branch", action="store_true", help="leave the publish step out (bench only)")
    p = sub.add_parser("publish-later", help="(inside a measurement) publish the branch, timed")
    p.add_argument("--record", required=True)
    sub.add_parser("branch-days", help="(inside a measurement) the days each target's branch holds, JSON")
    args = parser.parse_args(argv)
    if args.command == "certify":
        return certify(args.run, not args.without_branch, Path(args.record))
    if args.command == "publish-later":
        return publish_later(Path(args.record))
    if args.command == "table":
        print(markdown(merge([json.loads(Path(r).read_text()) for r in args.reports])))
        return 0
    if args.command == "branch-days":
        print(json.dumps(branch_days()))
        return 0
    report = measure(Path(args.workdir), args.days, args.rows, args.pairs, Path(args.data) if args.data else None,
                     shared=not args.separate_runs, first_pair=args.first_pair)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(report) if args.markdown else json.dumps(report, indent=2))
    return 0 if report["all_correct"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
