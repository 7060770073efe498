"""The user's own commands, timed as whole processes on a real instance: ours and the dagster-dbt peer's.

Two paths, each on the embedded instance (SQLite under DAGSTER_HOME, as
``atlasmart dagster-home`` prepares it) or the team instance (Postgres, a
scratch database the benchmark creates and drops):

* ``cli``: ``dagster asset materialize`` of the chain (one day, or a
  ``--partition-range``) from a cold process; ours then runs
  ``atlasmart certify --run`` (certification_sensor's work), so run start ->
  CERTIFIED in the ledger is the two commands' sum.
* ``daemon``: what the UI's *Materialize* of a partition range does: an asset
  backfill queued on the instance, which ``dagster-daemon`` (started first,
  and timed only once it beats) turns into runs through the run queue. Timed
  from the submission to the backfill's end; ours also to the last day
  served (``served_*`` materialized by certification_sensor, what the UI shows
  as certified).

Each process's peak RSS is its own (``/usr/bin/time``'s, else ``wait4``'s),
including the children it waited for (the peer's dbt subprocess); the
machine's load average is read before each measurement. Correctness is checked by the caller against the
generator's controls.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from ..errors import UsageError
from ..settings import Settings, current

POSTGRES_ENV = Settings.bench_postgres.name  # the server the team scenarios create scratch databases on
DEFAULT_POSTGRES = Settings.bench_postgres.default
_DAEMONS_NEEDED = ("BACKFILL", "QUEUED_RUN_COORDINATOR", "SENSOR")
_BIN = Path(sys.executable).parent
OURS_MODULE = "atlasmart_dagster"
PEER_MODULE = "atlasmart_dagster.bench.peer_definitions"


def load_average() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def run_measured(command: Sequence[str], env: dict[str, str], timeout: float = 7200) -> tuple[int, str, str, float, float]:
    """Run ``command``; (exit code, stdout, stderr, wall seconds, peak RSS MB of the process and its children)."""
    import tempfile

    # A forked child's peak RSS starts at its parent's (Linux keeps the pre-exec high-water mark), and the
    # benchmark's own process holds the generated data: /usr/bin/time, small itself, measures the command alone.
    timer = Path("/usr/bin/time")
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        wrapped = [str(timer), "-f", "%M", "-o", rss.name, *command] if timer.exists() else list(command)
        started = time.perf_counter()
        process = subprocess.Popen(wrapped, env=env, stdout=out, stderr=err, text=True)
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - started > timeout:
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.05)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        # the process's own peak, with the children it waited for (the peer's dbt run)
        measured = rss.read().strip().splitlines()
        peak_kb = int(measured[-1]) if measured and measured[-1].isdigit() else usage.ru_maxrss
        return process.returncode, out.read(), err.read(), wall, peak_kb / 1024


@contextmanager
def scratch_postgres(prefix: str) -> Iterator[str]:
    """A new empty database on the benchmark's Postgres server; yields its URL and drops it afterwards."""
    try:
        import psycopg2
    except ImportError as exc:  # the team extra
        raise UsageError("team scenarios need psycopg2: pip install 'atlasmart_dagster[team]'") from exc
    server = current().bench_postgres
    try:
        admin = psycopg2.connect(server, connect_timeout=5)
    except psycopg2.Error as exc:
        raise UsageError(f"team scenarios need PostgreSQL at {server} (set {POSTGRES_ENV}): "
                         f"{str(exc).strip().splitlines()[0]}") from exc
    admin.autocommit = True
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server.rsplit('/', 1)[0]}/{name}"
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def ours_environment(landing: Path, home: Path, first_day: str, team_url: str | None) -> dict[str, str]:
    """Our processes' environment, with DAGSTER_HOME prepared by ``atlasmart dagster-home``."""
    env = {**os.environ, "ATLASMART_HOME": str(home), "ATLASMART_LANDING": str(landing),
           "ATLASMART_FIRST_SALES_DATE": first_day}
    env.pop("DAGSTER_HOME", None)
    if team_url:
        shared = home.parent / f"{home.name}_shared"
        shared.mkdir(parents=True, exist_ok=True)
        env.update({"ATLASMART_DATABASE_URL": team_url, "ATLASMART_WAREHOUSE": str(shared)})
    prepared = subprocess.run([str(_BIN / "atlasmart"), "dagster-home"], env=env, capture_output=True, text=True)
    if prepared.returncode:
        raise RuntimeError(f"atlasmart dagster-home failed: {prepared.stderr[-500:]}")
    env["DAGSTER_HOME"] = prepared.stdout.strip()
    return env


def peer_dagster_home(workdir: Path, team_url: str | None) -> Path:
    """The peer's DAGSTER_HOME: Dagster's defaults (SQLite), or Postgres storage on the scratch database."""
    home = workdir / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    storage = f"storage:\n  postgres:\n    postgres_url: {json.dumps(team_url)}\n" if team_url else ""
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n" + storage)
    return home


def cli_ours(env: dict[str, str], chain: Sequence[str], days: list[str]) -> dict:
    """``dagster asset materialize`` of the chain, then ``atlasmart certify --run``."""
    load = load_average()
    code, _, err, wall, peak = run_measured(
        [str(_BIN / "dagster"), "asset", "materialize", "-m", OURS_MODULE, "--select", ",".join(chain),
         *partition_args(days)], env)
    if code:
        return {"seconds": wall, "success": False, "failures": [err[-500:]], "load": load}
    run_id = re.search(r" - ([0-9a-f-]{36}) - .*RUN_SUCCESS", err)
    certify_code, _, certify_err, certify_s, _ = run_measured(
        [str(_BIN / "atlasmart"), "--json", "certify", "--run", run_id.group(1) if run_id else "?"], env)
    controls = served_controls(env)
    ok = certify_code == 0 and set(days) <= set(controls)
    return {"seconds": wall, "certify_seconds": certify_s, "success": ok, "certified": len(controls),
            "controls": controls, "peak_rss_mb": peak, "load": load,
            "events_per_partition": events_per_partition(env, len(days)),
            "failures": [] if ok else [certify_err[-500:] or "not every day certified"]}


def cli_peer(env: dict[str, str], days: list[str]) -> dict:
    """The peer's ``dagster asset materialize`` of the days (its manifest prepared beforehand)."""
    load = load_average()
    code, _, err, wall, peak = run_measured(
        [str(_BIN / "dagster"), "asset", "materialize", "-m", PEER_MODULE, "--select", "*", *partition_args(days)], env)
    return {"seconds": wall, "success": code == 0, "failures": [err[-500:]] if code else [], "runs": 1,
            "peak_rss_mb": peak, "load": load}


def daemon_backfill(env: dict[str, str], module: str, chain: Sequence[str] | None, days: list[str],
                    served: Sequence[str] = (), timeout: float = 3600) -> dict:
    """Start ``dagster-daemon``, queue an asset backfill of ``chain`` x ``days`` once it beats, wait for it.

    ``seconds`` is submission -> the backfill's end; with ``served`` (ours), ``certified_seconds`` is
    submission -> every day materialized on each served asset.
    """
    log = open(Path(env["DAGSTER_HOME"]) / "bench-daemon.log", "w")
    daemon = subprocess.Popen([str(_BIN / "dagster-daemon"), "run", "-m", module], env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        instance = _instance(env)
        try:
            if not _wait_for_heartbeats(instance, daemon, 240):
                return {"seconds": 0.0, "success": False, "failures": ["dagster-daemon did not start beating"]}
            load = load_average()
            submitted = subprocess.run(
                [sys.executable, "-m", __name__, "submit", module, ",".join(chain or []), ",".join(days)],
                env=env, capture_output=True, text=True)
            started = time.perf_counter()
            if submitted.returncode:
                return {"seconds": 0.0, "success": False, "failures": [submitted.stderr[-500:]], "load": load}
            backfill_id = submitted.stdout.strip().splitlines()[-1]
            status, done_s = _wait_for_backfill(instance, backfill_id, started, timeout)
            certified_s = _wait_for_served(instance, served, days, started, timeout) if served and status else None
            runs = instance.get_runs(filters=_backfill_filter(backfill_id))
            ok = status == "COMPLETED_SUCCESS" and all(r.status.value == "SUCCESS" for r in runs) and (
                not served or certified_s is not None)
            return {"seconds": done_s, "certified_seconds": certified_s, "success": ok, "runs": len(runs),
                    "run_seconds": round(sum((r.end_time or 0) - (r.start_time or 0) for r in _records(instance, runs)), 3),
                    "backfill_status": status, "load": load,
                    "failures": [] if ok else [f"backfill {backfill_id} {status}; runs "
                                               f"{[r.status.value for r in runs]}"]}
        finally:
            instance.dispose()
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()
        try:  # the daemon's code server can outlive a graceful stop of the group: never leave it running
            os.killpg(daemon.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        log.close()


def _instance(env: dict[str, str]):
    import dagster as dg

    saved = dict(os.environ)
    os.environ.update({k: v for k, v in env.items() if k.startswith(("ATLASMART_", "DAGSTER_"))})
    try:
        return dg.DagsterInstance.from_config(env["DAGSTER_HOME"])
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _wait_for_heartbeats(instance, daemon: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and daemon.poll() is None:
        beats = instance.get_daemon_heartbeats()
        if all(name in beats and time.time() - beats[name].timestamp < 30 for name in _DAEMONS_NEEDED):
            return True
        time.sleep(1)
    return False


def _wait_for_backfill(instance, backfill_id: str, started: float, timeout: float) -> tuple[str | None, float]:
    terminal = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED", "FAILING"}
    while time.perf_counter() - started < timeout:
        backfill = instance.get_backfill(backfill_id)
        if backfill is not None and backfill.status.value in terminal and backfill.status.value != "FAILING":
            return backfill.status.value, time.perf_counter() - started
        time.sleep(0.5)
    return None, time.perf_counter() - started


def _wait_for_served(instance, served: Sequence[str], days: list[str], started: float, timeout: float) -> float | None:
    import dagster as dg

    while time.perf_counter() - started < timeout:
        if all(set(days) <= instance.get_materialized_partitions(dg.AssetKey(a)) for a in served):
            return time.perf_counter() - started
        time.sleep(0.5)
    return None


def _backfill_filter(backfill_id: str):
    import dagster as dg

    return dg.RunsFilter(tags={"dagster/backfill": backfill_id})


def _records(instance, runs):
    import dagster as dg

    return instance.get_run_records(filters=dg.RunsFilter(run_ids=[r.run_id for r in runs])) if runs else []


def served_controls(env: dict[str, str]) -> dict[str, dict]:
    """The certified controls of each day, as ``atlasmart --json status`` reports them."""
    status = subprocess.run([str(_BIN / "atlasmart"), "--json", "status"], env=env, capture_output=True, text=True)
    controls = {}
    if status.returncode == 0:
        for day in json.loads(status.stdout):
            served = [a for a in day["assets"] if a["asset"] == "mart_finance_daily_sales" and a["controls"]]
            if served:
                controls[day["partition"]] = served[0]["controls"]
    return controls


def events_per_partition(env: dict[str, str], partitions: int) -> float | None:
    """Dagster events the (first) materialize run wrote to the instance, per partition."""
    instance = _instance(env)
    try:
        runs = [r for r in instance.get_runs() if r.job_name == "__ASSET_JOB"]
        return round(len(instance.all_logs(runs[-1].run_id)) / partitions, 1) if runs else None
    finally:
        instance.dispose()


def partition_args(days: list[str]) -> list[str]:
    return ["--partition", days[0]] if len(days) == 1 else ["--partition-range", f"{days[0]}...{days[-1]}"]


def _submit(module: str, chain: str, days: str) -> None:
    """Queue the asset backfill the UI's *Materialize* of a range queues (run in the measured environment)."""
    import importlib

    import dagster as dg

    from ..ops.runs.dagster_backfill_adapter import queue_asset_backfill

    loaded = importlib.import_module(module)
    # a package code location (``-m atlasmart_dagster``) keeps its Definitions in its definitions module
    defs = getattr(loaded, "defs", None)
    if not isinstance(defs, dg.Definitions):
        defs = importlib.import_module(f"{module}.definitions").defs
    keys = [dg.AssetKey(a) for a in chain.split(",")] if chain else list(defs.resolve_asset_graph().get_all_asset_keys())
    instance = dg.DagsterInstance.get()
    print(queue_asset_backfill(defs, instance, days.split(","), keys, {}, "bench", "benchmark: the UI's path"))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "submit":
        _submit(*sys.argv[2:])
    else:
        raise SystemExit("usage: python -m atlasmart_dagster.bench.user_paths submit MODULE CHAIN DAYS")
