"""The Dagster backfill adapter queues what it was asked to (this fails first on an upgrade that changes it)."""

import dagster as dg

from atlasmart_dagster.ops.runs.dagster_backfill_adapter import queue_asset_backfill
from atlasmart_dagster_tests.environment import SAMPLE_DAYS


def test_a_queued_backfill_holds_the_assets_partitions_and_tags(env):
    keys = [dg.AssetKey("agg_daily_sales"), dg.AssetKey("metric_gross_revenue")]
    with dg.instance_for_test() as instance:
        backfill_id = queue_asset_backfill(
            env.defs, instance, SAMPLE_DAYS[1:3], keys, {"atlasmart/lane": "backfill"}, "BF-0001", "why"
        )
        backfill = instance.get_backfill(backfill_id)
        assert backfill.status.value == "REQUESTED"
        assert backfill.tags["atlasmart/lane"] == "backfill"
        assert set(backfill.asset_selection) == set(keys)
        assert backfill.title == "BF-0001" and backfill.description == "why"
        targeted = backfill.asset_backfill_data.target_subset.get_partitions_subset(keys[0])
        assert sorted(targeted.get_partition_keys()) == SAMPLE_DAYS[1:3]
