"""The two real faults the incident tests start from, written once: a renamed source field and a corrupted aggregate.

Each leaves the day as the product would find it after the fault: the
contract gate stopped the load (a failed blocking check, nothing published),
or the reconciliation of a certified aggregate failed. No incident is opened
here; the tests open it the way they test (a command, the sensor, a drill).
"""

from __future__ import annotations

from datetime import date, timedelta

import dagster as dg

from atlasmart_dagster.domain.check_names import AGG_MATCHES_FACT
from atlasmart_dagster.drills.faults import corrupt_aggregate_cost, drift_rename_field
from atlasmart_dagster.definitions import incident_sensor
from atlasmart_dagster.ops.runs.chains import run_chain, run_checks
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import Env


def stop_day_by_contract_drift(env: Env, day: str) -> str:
    """The ERP renames ``line_amount_usd`` in ``day``'s delivery; its load fails at the contract gate. The batch id."""
    manifest = drift_rename_field(env.day_dir(day), env.day_dir(day) / "_manifest.json", "line_amount_usd",
                                  "gross_line_amount_usd")
    assert not run_chain(env.defs, env.instance, env.platform, [day], lane="current").success
    return manifest["batch_id"]


def corrupted_aggregate(tmp_path, day: str) -> Env:
    """The day before ``day`` and ``day`` certified, then ``day``'s published aggregate cost moved by +10.00 and caught."""
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")
    previous = (date.fromisoformat(day) - timedelta(days=1)).isoformat()
    assert run_chain(env.defs, env.instance, env.platform, [previous, day], lane="backfill").success
    corrupt_aggregate_cost(env.platform, day, +10)
    key = dg.AssetCheckKey(dg.AssetKey("agg_daily_sales"), AGG_MATCHES_FACT)
    assert not run_checks(env.defs, env.instance, [key], day).success
    return env


def tick(env) -> dg.SkipReason:
    """One tick of incident_sensor as the daemon runs it, the cursor kept between ticks (``env.cursor``)."""
    context = dg.build_sensor_context(instance=env.instance, resources={"atlasmart": env.resource},
                                      cursor=getattr(env, "cursor", None))
    result = incident_sensor(context)
    env.cursor = context.cursor
    return result
