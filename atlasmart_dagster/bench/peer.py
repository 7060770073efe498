"""The benchmark's peer: the same daily sales chain as a dbt project on dbt-duckdb, run by dagster-dbt.

The dbt project ships in ``peer_dbt/`` next to this module: a quality gate
with quarantine reasons, staging with the current version of each line, the
paid fact (grain ``(order_id, line_no)``), the daily aggregate, the governed
revenue metric and the two marts, each a daily-partitioned incremental model
that replaces its window. dbt tests check the grains, the aggregate against
the fact and that the gate accounts for every landed row.

It is wired the way dagster-dbt documents it: ``@dbt_assets`` over the
manifest with a ``DailyPartitionsDefinition``, the partition window passed to
``dbt build --vars``, tests reported as asset checks, and the manifest
prepared once beforehand (``dbt parse``, what ``dagster-dbt project
prepare-and-package`` does for a deployment). The peer reads the landing
zone the generator writes and keeps its tables in one DuckDB file.

What it leaves out, and the product does: the raw store and its checksums,
contract versions and approvals, Iceberg snapshots, the ledger,
certification, restatement holds and last-known-good serving.

Only the benchmark imports this module; dagster-dbt and dbt come from the
``bench`` extra and are imported here and in ``peer_definitions.py`` only.
"""

import importlib.util
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import dagster as dg

from ..domain.controls import FACT_CONTROLS_SQL, ControlTuple, controls_by_date

PROJECT_DIR = Path(__file__).resolve().parent / "peer_dbt"
DUCKDB_ENV = "ATLASMART_PEER_DUCKDB"
LANDING_ENV = "ATLASMART_PEER_LANDING"
TARGET_ENV = "DBT_TARGET_PATH"  # dagster-dbt puts each invocation's target folder under it
NOT_INSTALLED = "not installed (pip install atlasmart_dagster[bench])"
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def installed() -> bool:
    """True when dagster-dbt and dbt-duckdb can be imported (the ``bench`` extra)."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in ("dagster_dbt", "dbt.adapters.duckdb"))
    except ModuleNotFoundError:
        return False


def peer_environment(workdir: Path, landing: Path, target_dir: Path | None = None) -> dict[str, str]:
    """The variables the dbt project reads: its DuckDB file, the landing zone, and where dbt writes artifacts.

    ``PATH`` starts with this interpreter's scripts folder, where pip put the
    ``dbt`` executable that dagster-dbt launches (a venv need not be activated).
    """
    workdir = Path(workdir).resolve()
    target = str(Path(target_dir).resolve()) if target_dir else str(workdir / "target")
    scripts = str(Path(sys.executable).parent)
    return {
        "PATH": scripts + os.pathsep + os.environ.get("PATH", ""),
        DUCKDB_ENV: str(workdir / "peer.duckdb"),
        LANDING_ENV: str(Path(landing).resolve()),
        TARGET_ENV: target,
        "DBT_LOG_PATH": target,
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    }


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` for the block (dbt runs as a subprocess that inherits it)."""
    previous = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def dbt_project(target_dir: str | Path):
    """The packaged dbt project, its manifest and partial-parse state in ``target_dir`` (never in the package)."""
    from dagster_dbt import DbtProject

    return DbtProject(project_dir=PROJECT_DIR, target_path=Path(target_dir).resolve())


def prepare(target_dir: str | Path) -> Path:
    """Parse the dbt project into ``target_dir/manifest.json`` (the deployment step; needs the peer environment)."""
    project = dbt_project(target_dir)
    project.preparer.prepare(project)
    return project.manifest_path


def build_peer_definitions(target_dir: str | Path, first_day: str) -> dg.Definitions:
    """The dagster-dbt definitions of the peer: one ``@dbt_assets`` over daily partitions from ``first_day``."""
    from dagster_dbt import DbtCliResource, dbt_assets

    project = dbt_project(target_dir)
    daily = dg.DailyPartitionsDefinition(start_date=first_day, timezone="UTC")

    # One run per backfill, as dagster-dbt recommends for partitioned dbt assets (and as ours does).
    @dbt_assets(manifest=project.manifest_path, project=project, partitions_def=daily,
                backfill_policy=dg.BackfillPolicy.single_run())
    def atlasmart_peer_dbt_assets(context: dg.AssetExecutionContext, dbt: DbtCliResource):
        """The peer's whole chain for the run's partition window (one day or a range, one dbt build)."""
        window = context.partition_time_window
        dbt_vars = {"min_date": window.start.date().isoformat(), "max_date": window.end.date().isoformat()}
        yield from dbt.cli(["build", "--vars", json.dumps(dbt_vars)], context=context).stream()

    return dg.Definitions(assets=[atlasmart_peer_dbt_assets], resources={"dbt": DbtCliResource(project_dir=project)})


def materialize_days(
    defs: dg.Definitions, days: Sequence[str], instance: dg.DagsterInstance | None = None
) -> dg.ExecuteInProcessResult:
    """One in-process run of the peer for ``days`` (consecutive): a partition key, or a range in one run."""
    assets = list(defs.assets or [])
    if len(days) == 1:
        return dg.materialize(assets, resources=defs.resources, instance=instance, partition_key=days[0],
                              run_config=QUIET, raise_on_error=False)
    tags = {"dagster/asset_partition_range_start": days[0], "dagster/asset_partition_range_end": days[-1]}
    return dg.materialize(assets, resources=defs.resources, instance=instance, tags=tags, run_config=QUIET,
                          raise_on_error=False)


def read_controls(duckdb_path: str | Path, days: Sequence[str]) -> dict[str, ControlTuple]:
    """The control tuple per day from the peer's ``fact_sales`` (a day without rows is zeros)."""
    import duckdb

    con = duckdb.connect(str(duckdb_path), read_only=True)
    try:
        wanted = ", ".join(f"DATE '{d}'" for d in days)
        con.execute(f"CREATE TEMP VIEW peer_fact AS SELECT * FROM fact_sales WHERE sales_date IN ({wanted})")
        found = controls_by_date(con, FACT_CONTROLS_SQL, "peer_fact")
    finally:
        con.close()
    return {d: found.get(d, ControlTuple()) for d in days}


def failures_of(result: dg.ExecuteInProcessResult) -> list[str]:
    """Short descriptions of what failed in a run: failed steps and failed dbt tests."""
    found = []
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            while error is not None and error.cause is not None:  # the dbt error, not the step wrapper
                error = error.cause
            found.append((error.message if error else str(event.message)).strip()[:300])
    for event in result.get_asset_check_evaluations():
        if not event.passed:
            found.append(f"dbt test {event.check_name} on {event.asset_key.to_user_string()} failed")
    return found


def run_peer(workdir: Path, landing: Path, days: Sequence[str], first_day: str, target_dir: Path | None = None,
             warm_day: str | None = None, mode: str = "range") -> dict:
    """Optionally warm up on ``warm_day``, then time the peer over ``days``; returns seconds, controls, failures.

    The peer's tables go to ``workdir/peer.duckdb``. ``target_dir`` holds the
    prepared manifest (prepared here when missing; a deployment step, never
    timed). ``mode`` is ``range`` (one run for all days, also for a single
    day) or ``per_partition`` (one run per day).
    """
    env = peer_environment(workdir, landing, target_dir)
    Path(workdir).mkdir(parents=True, exist_ok=True)
    Path(env[TARGET_ENV]).mkdir(parents=True, exist_ok=True)
    with environment(env):
        if not (Path(env[TARGET_ENV]) / "manifest.json").exists():
            prepare(env[TARGET_ENV])
        defs = build_peer_definitions(env[TARGET_ENV], first_day)
        instance = dg.DagsterInstance.ephemeral()
        if warm_day:
            warm = materialize_days(defs, [warm_day], instance)
            if not warm.success:
                return {"seconds": 0.0, "success": False, "failures": failures_of(warm), "runs": 0, "controls": {}}
        started = time.perf_counter()
        batches = [[d] for d in days] if mode == "per_partition" else [list(days)]
        results = [materialize_days(defs, batch, instance) for batch in batches]
        seconds = time.perf_counter() - started
    success = all(r.success for r in results)
    controls = read_controls(env[DUCKDB_ENV], days) if success else {}
    return {
        "seconds": seconds,
        "success": success,
        "failures": [f for r in results for f in failures_of(r)][:3],
        "runs": len(results),
        "checks_passed": sum(1 for r in results for e in r.get_asset_check_evaluations() if e.passed),
        "controls": {d: c.to_json() for d, c in controls.items()},
    }
