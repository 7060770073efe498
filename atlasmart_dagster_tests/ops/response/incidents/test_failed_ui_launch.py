"""A failed chain run launched without the command line opens (or joins) its day's incident, titled by its mechanism.

The run is what the UI launches: ``dagster.materialize`` of the daily chain
for one day, no ``atlasmart`` command, no tag of ours (its first step adds the lane, as for any launch). ``incident_sensor``, as
the daemon ticks it, then finds the evidence the run's own steps recorded
(issue 33, item 4): detection reads the ledger and the instance, not a
command's output, so the launch path does not matter.
"""

import dagster as dg

from atlasmart_dagster.drills.faults import drift_rename_field
from atlasmart_dagster.store.ledger.incidents import IncidentStore
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch
from atlasmart_dagster_tests.ops.response.incidents.faulted_days import tick

DAY = "2026-09-19"
CHAIN = dg.AssetSelection.tag("atlasmart/chain", "daily")


def launched_from_the_ui(env: Env, day: str) -> dg.ExecuteInProcessResult:
    result = dg.materialize([*env.defs.assets, *env.defs.asset_checks], selection=CHAIN, partition_key=day,
                            instance=env.instance, resources=env.defs.resources, raise_on_error=False)
    assert not result.success  # the chain turned red
    return result


def open_incidents(env: Env):
    return IncidentStore(env.platform.ledger).open_incidents()


def test_a_lying_resend_launched_from_the_ui_opens_a_source_rejected_incident_and_the_day_stays_served(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T07:00:00Z")
    assert run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill").certified == [DAY]
    tick(env)
    assert open_incidents(env) == []
    rows = read_rows(env.day_dir(DAY))
    write_batch(env.day_dir(DAY), rows, batch_id="ERP-20260919-02", expected_rows=len(rows) + 1)  # it lies

    launched_from_the_ui(env, DAY)
    assert tick(env).skip_message.startswith("incidents opened or updated: INC-0001")
    (incident,) = open_incidents(env)
    assert incident.title.startswith(f"Source rejected: the delivery of {DAY} was refused: expected_rows is ")
    assert DAY in incident.partitions
    assert partition_status(env.platform, DAY).state == "CERTIFIED"  # consumers keep v1

    launched_from_the_ui(env, DAY)  # launched again from the UI: the same refusal joins, nothing new opens
    tick(env)
    assert [i.id for i in open_incidents(env)] == [incident.id]


def test_a_renamed_field_launched_from_the_ui_opens_a_check_failed_incident(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-20T08:20:00Z")
    drift_rename_field(env.day_dir(DAY), env.day_dir(DAY) / "_manifest.json", "line_amount_usd",
                       "gross_line_amount_usd")
    launched_from_the_ui(env, DAY)
    tick(env)
    (incident,) = open_incidents(env)
    assert incident.title == f"Check failed: raw_order_lines:source_contract_conforms for {DAY}"
