"""A new batch for a certified day: restatement pending, then only that day rebuilt, history kept."""

import dagster as dg

from atlasmart_dagster.defs.automation.sensors import landing_manifest_sensor
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAY = "2026-09-20"


def test_late_redelivery_is_restated_in_the_backfill_lane(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-23T10:00:00Z")
    first = run_chain(env.defs, env.instance, env.platform, ["2026-09-19", DAY], lane="backfill")
    assert first.certified == ["2026-09-19", DAY]
    neighbour = env.ledger.partitions.served("mart_finance_daily_sales", "2026-09-19").certification

    rows = read_rows(env.day_dir(DAY))
    correction = {**rows[2], "source_seq": 209, "quantity": 2, "line_amount_usd": "100.00", "line_cost_usd": "60.00"}
    write_batch(env.day_dir(DAY), [correction], batch_id="ERP-20260920-02", ready_at="2026-09-23T09:30:00Z")

    context = dg.build_sensor_context(instance=env.instance, resources={"atlasmart": env.resource})
    requests = {r.partition_key: r for r in landing_manifest_sensor(context).run_requests}
    request = requests[DAY]  # other sample days were never loaded here; they are requested too
    assert partition_status(env.platform, DAY).state == "RESTATEMENT_PENDING"
    assert partition_status(env.platform, DAY).certified_version == 1  # still served meanwhile

    restated = run_chain(env.defs, env.instance, env.platform, [request.partition_key],
                         lane=request.tags["atlasmart/lane"], tags=request.tags)
    assert restated.lane == "backfill" and restated.certified == [DAY]
    status = partition_status(env.platform, DAY)
    assert status.state == "CERTIFIED" and status.certified_version == 2 and "restated" in status.detail
    served = env.ledger.partitions.served("mart_finance_daily_sales", DAY).certification.controls
    assert str(served) == "(3, 2, 5, 235, 160, 75)"  # O1005/1 corrected: qty 2, 100 USD
    # only that day was rebuilt; the neighbour kept its certification; both batches are in the raw store
    assert {e.partition for e in restated.result.get_asset_materialization_events()} == {DAY}
    assert env.ledger.partitions.served("mart_finance_daily_sales", "2026-09-19").certification == neighbour
    assert [b.batch_id for b in env.platform.raw_store.batches(DAY)] == ["ERP-20260920-01", "ERP-20260920-02"]
