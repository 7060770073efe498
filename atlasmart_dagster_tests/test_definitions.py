"""The code location loads cleanly and wires every layer, check, job, schedule and sensor.

What the code location defines is held by a snapshot (``definitions_snapshot.json``): every asset with its
dependencies and partitioning, every check with its asset and whether it blocks, every job, sensor and schedule.
A change to the definitions fails ``test_the_definitions_match_their_snapshot`` until the snapshot is rewritten
with ``ATLASMART_UPDATE_SNAPSHOT=1 pytest atlasmart_dagster_tests/test_definitions.py`` and the diff is reviewed
with the change.
"""

import json
import os
from pathlib import Path

import dagster as dg

from atlasmart_dagster.definitions import defs

SNAPSHOT = Path(__file__).with_name("definitions_snapshot.json")


def definitions_snapshot() -> dict:
    """What the code location defines, in a stable order, as plain data."""
    graph = defs.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        assets[key.to_user_string()] = {
            "deps": sorted(k.to_user_string() for k in node.parent_keys),
            "partitioned": node.partitions_def is not None,
            "group": node.group_name,
        }
    checks = {}
    for key in sorted(graph.asset_check_keys, key=lambda k: (k.asset_key.to_user_string(), k.name)):
        spec = graph.get_check_spec(key)
        checks[f"{key.asset_key.to_user_string()}:{key.name}"] = {
            "blocking": spec.blocking, "partitioned": spec.partitions_def is not None}
    return {
        "assets": assets,
        "checks": checks,
        "jobs": sorted(job.name for job in defs.jobs or []),
        "sensors": {s.name: str(s.default_status.value) for s in sorted(defs.sensors, key=lambda s: s.name)},
        "schedules": {s.name: s.cron_schedule for s in sorted(defs.schedules, key=lambda s: s.name)},
    }


def test_the_definitions_match_their_snapshot():
    current = definitions_snapshot()
    if os.environ.get("ATLASMART_UPDATE_SNAPSHOT") == "1":
        SNAPSHOT.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(SNAPSHOT.read_text())
    assert current["assets"] and current["checks"] and current["jobs"], "the code location defines nothing"
    assert current == recorded, (
        "the definitions changed: review the change and rewrite the snapshot with ATLASMART_UPDATE_SNAPSHOT=1")


def _chain() -> list[str]:
    """The partitioned layers from the snapshot, raw to marts: what every day's run builds."""
    assets = json.loads(SNAPSHOT.read_text())["assets"]
    return [name for name, asset in assets.items() if asset["partitioned"] and not name.startswith("served_")]



def test_code_location_loads_without_warnings():
    """A fresh interpreter imports the code location and resolves everything silently."""
    import subprocess
    import sys

    probe = (
        "import warnings; warnings.simplefilter('always'); import atlasmart_dagster as m; "
        "d = m.code_location; d.resolve_asset_graph(); [d.resolve_job_def(j) for j in ('daily_sales_job','backfill_sales_job')]"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr


def test_every_job_schedule_and_sensor_resolves():
    for name in ("daily_sales_job", "backfill_sales_job", "reference_job"):
        defs.resolve_job_def(name)
    assert defs.resolve_schedule_def("daily_sales_schedule").cron_schedule == "0 8 * * *"
    assert {s.name for s in defs.sensors} == {"landing_manifest_sensor", "certification_sensor", "incident_sensor",
                                             "stale_run_sensor"}


def test_lineage_runs_from_raw_to_consumers():
    graph = defs.resolve_asset_graph()
    downstream = dg.AssetSelection.assets("raw_order_lines").downstream().resolve(graph)
    names = {k.to_user_string() for k in downstream}
    chain = _chain()
    assert len(chain) >= 8 and set(chain) - {"raw_order_lines"} <= names
    assert {"dashboard_finance_daily_sales", "dashboard_executive_revenue", "consumer_group_finance",
            "consumer_group_executives"} <= names


def test_all_partitioned_assets_share_one_daily_partitions_definition():
    graph = defs.resolve_asset_graph()
    pdefs = {graph.get(dg.AssetKey(k)).partitions_def for k in _chain()}
    assert len(pdefs) == 1
    (pdef,) = pdefs
    assert pdef.get_first_partition_key() == "2026-09-17" and pdef.timezone == "UTC"


def test_consumer_protecting_checks_are_blocking():
    graph = defs.resolve_asset_graph()
    checks = {k.name: graph.get_check_spec(k) for k in graph.asset_check_keys}
    for name in ("manifest_rows_match", "source_contract_conforms", "staged_rows_reconcile", "grain_unique",
                 "no_negative_money", "fact_matches_staging", "agg_matches_fact", "metric_matches_agg",
                 "mart_matches_agg_and_metric", "channel_split_adds_up"):
        assert checks[name].blocking, name


def test_every_asset_has_an_owner_and_a_description():
    for spec in defs.resolve_all_asset_specs():
        assert spec.owners, spec.key
        assert spec.description, spec.key


def test_metric_contract_is_shown_as_metadata():
    spec = next(s for s in defs.resolve_all_asset_specs() if s.key.to_user_string() == "metric_gross_revenue")
    definition = spec.metadata["metric_definition"].value
    assert {"measure", "filters", "grain", "version"} <= set(definition)


def test_the_package_exposes_exactly_one_definitions_for_dagster_m_atlasmart_dagster():
    """`dagster ... -m atlasmart_dagster` collects the Definitions among the package's members.

    The ``defs/`` folder is the package attribute ``defs`` once any of its
    modules is imported, so the code location is exposed under another name.
    """
    import inspect

    import atlasmart_dagster
    import atlasmart_dagster.defs.partitions  # noqa: F401  (as any import of the folder does)

    found = [value for _, value in inspect.getmembers(atlasmart_dagster) if isinstance(value, dg.Definitions)]
    assert len(found) == 1 and found[0] is defs


def test_the_sensors_a_working_install_needs_are_on_by_default_and_the_loaders_are_not():
    """Certification, incident detection and the dead-run reaper react to what happened: on from the start.
    The schedule and the landing sensor start loads: an operator turns them on (README)."""
    running = dg.DefaultSensorStatus.RUNNING
    for name in ("certification_sensor", "incident_sensor", "stale_run_sensor"):
        assert defs.resolve_sensor_def(name).default_status == running, name
    assert defs.resolve_sensor_def("landing_manifest_sensor").default_status != running
    assert defs.resolve_schedule_def("daily_sales_schedule").default_status != dg.DefaultScheduleStatus.RUNNING


def test_every_check_of_a_partitioned_asset_run_in_its_step_is_partitioned():
    """Only a check with partitions_def shows its evaluations' days in the UI's Partition column."""
    graph = defs.resolve_asset_graph()
    in_step = [k for k in graph.asset_check_keys
               if graph.get(k.asset_key).partitions_def is not None
               and k.name not in {"certification_state", "open_incidents"} and not k.name.startswith("slo_")]
    assert len(in_step) >= 10
    for key in in_step:
        assert graph.get_check_spec(key).partitions_def is not None, key
