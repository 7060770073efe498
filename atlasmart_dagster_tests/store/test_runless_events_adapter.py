"""A batch of runless materializations reads back exactly as the same events reported one by one."""

import dagster as dg
import pytest

from atlasmart_dagster.store.home import AtlasmartHome
from atlasmart_dagster.store.instance.dagster_instance import prepare_dagster_home
from atlasmart_dagster.store.instance.runless_events_adapter import report_runless_materializations

DAYS = ["2026-09-17", "2026-09-18", "2026-09-19"]


def _stored(instance: dg.DagsterInstance, key: dg.AssetKey) -> list[tuple]:
    records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key), limit=100).records
    return [(r.run_id, r.asset_materialization.partition, r.asset_materialization.metadata["v"].value)
            for r in reversed(records)]


@pytest.mark.parametrize("embedded", [True, False], ids=["embedded", "ephemeral"])
def test_a_batch_is_stored_as_reporting_one_by_one_stores_it(tmp_path, monkeypatch, embedded):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    instance = (dg.DagsterInstance.from_config(str(prepare_dagster_home(AtlasmartHome(tmp_path / "home"))))
                if embedded else dg.DagsterInstance.ephemeral())
    one, batched = dg.AssetKey("served_one"), dg.AssetKey("served_batched")
    try:
        for day in DAYS:
            instance.report_runless_asset_event(dg.AssetMaterialization(one, partition=day, metadata={"v": day}))
        report_runless_materializations(
            instance, [dg.AssetMaterialization(batched, partition=day, metadata={"v": day}) for day in DAYS])
        assert _stored(instance, batched) == _stored(instance, one) == [("", d, d) for d in DAYS]
        assert instance.get_materialized_partitions(batched) == instance.get_materialized_partitions(one) == set(DAYS)
    finally:
        instance.dispose()
