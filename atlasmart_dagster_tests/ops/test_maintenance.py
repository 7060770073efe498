"""Snapshot expiry keeps everything consumers, the gate and open incidents still need."""

from atlasmart_dagster.ops import recovery
from atlasmart_dagster.ops.maintenance import expire_snapshots, protected_snapshots, remove_orphan_files
from atlasmart_dagster.ops.runs import run_chain
from atlasmart_dagster.product.serving import read_certified
from atlasmart_dagster.store.tables import FACT_SALES, MART_FINANCE_DAILY_SALES
from atlasmart_dagster_tests.environment import SAMPLE_DAYS


def test_expiry_keeps_served_versions_and_their_chain(env):
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").success
    for _ in range(3):  # history piles up snapshots
        assert run_chain(env.defs, env.instance, env.platform, ["2026-09-18"], lane="backfill").success
    before = len(env.warehouse.existing(FACT_SALES).snapshots())
    served_before = read_certified(env.platform, MART_FINANCE_DAILY_SALES.name)
    report = expire_snapshots(env.platform, keep_last=1)
    assert report["fact_sales"]["expired"] > 0 and len(env.warehouse.existing(FACT_SALES).snapshots()) < before
    kept = {s.snapshot_id for s in env.warehouse.existing(FACT_SALES).snapshots()}
    assert protected_snapshots(env.platform)["fact_sales"] <= kept
    removed = remove_orphan_files(env.platform, min_age_seconds=0)
    assert removed["fact_sales"] > 0
    assert read_certified(env.platform, MART_FINANCE_DAILY_SALES.name).equals(served_before)
    result = recovery.verify(env.platform)
    assert result["ok"], result["problems"]
    # the gate can still certify a new build against pinned versions
    assert run_chain(env.defs, env.instance, env.platform, ["2026-09-20"], lane="backfill").certified == ["2026-09-20"]
