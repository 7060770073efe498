"""Snapshot expiry keeps everything consumers, the gate and open incidents still need."""

from atlasmart_dagster.ops import recovery
from atlasmart_dagster.ops.recovery.maintenance import expire_snapshots, protected_snapshots, remove_orphan_files
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.restatements import approve_restatement, held_builds
from atlasmart_dagster.product.run_certification import certify_and_deliver
from atlasmart_dagster.product.serving import read_certified
from atlasmart_dagster.store.tables import FACT_SALES, MART_FINANCE_DAILY_SALES, TABLES_BY_NAME
from atlasmart_dagster_tests.environment import SAMPLE_DAYS
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch


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
    # Reruns of one batch write the same content-named files, so expiry leaves nothing behind; what a writer killed
    # before its commit leaves is a file no snapshot names, and that is what the sweep removes.
    data_dir = env.warehouse.data_dir(FACT_SALES)
    stray = data_dir / "sales_date=2026-09-18" / ("0" * 64 + ".parquet")
    stray.write_bytes(next(data_dir.rglob("*.parquet")).read_bytes())
    removed = remove_orphan_files(env.platform, min_age_seconds=0)
    assert removed["fact_sales"] == 1 and not stray.exists()
    assert read_certified(env.platform, MART_FINANCE_DAILY_SALES.name).equals(served_before)
    result = recovery.verify(env.platform)
    assert result["ok"], result["problems"]
    # the gate can still certify a new build against pinned versions
    assert run_chain(env.defs, env.instance, env.platform, ["2026-09-20"], lane="backfill").certified == ["2026-09-20"]



def test_expiry_keeps_a_held_restatement_approvable_once_it_is_no_longer_current(env):
    """The owner approves a held build at its own snapshots; the next day's load made them historical."""
    restated, later = SAMPLE_DAYS[1], SAMPLE_DAYS[3]
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS[:3], lane="backfill").success
    rows = [{**r, "source_seq": r["source_seq"] + 500, "line_amount_usd": "200.00", "line_cost_usd": "120.00"}
            for r in read_rows(env.day_dir(restated))]
    write_batch(env.day_dir(restated), rows, batch_id="ERP-20260918-02", ready_at="2026-09-23T06:30:00Z")
    assert run_chain(env.defs, env.instance, env.platform, [restated], lane="backfill").certified == []
    held = held_builds(env.platform, restated)
    assert held
    assert run_chain(env.defs, env.instance, env.platform, [later], lane="backfill").certified == [later]
    expire_snapshots(env.platform, keep_last=1)
    for build in held:
        assert env.warehouse.existing(TABLES_BY_NAME[build.asset]).snapshot_by_id(build.snapshot_id) is not None
    approve_restatement(env.platform, restated, "erp-operations", "erp data owner", "the ERP corrected the prices",
                        env.platform.clock.now())
    assert all(d.certified for d in certify_and_deliver(env.platform, held, True, "erp data owner"))
