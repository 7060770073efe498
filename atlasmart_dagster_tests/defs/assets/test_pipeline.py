"""The sample reproduces every figure of the reference README, through real Dagster runs."""

import pytest

from atlasmart_dagster.domain.controls import ControlTuple, total
from atlasmart_dagster.product.published_controls import controls_of, metric_revenue_of
from atlasmart_dagster.product.serving import partition_status, read_certified
from atlasmart_dagster.store.ledger.partition_states import BUILT, CERTIFIED
from atlasmart_dagster.store.tables import (
    AGG_DAILY_SALES,
    FACT_SALES,
    MART_EXECUTIVE_REVENUE,
    MART_FINANCE_DAILY_SALES,
    QUARANTINE_ORDER_LINES,
)
from atlasmart_dagster_tests.environment import SAMPLE_DAYS

EXPECTED = {
    "2026-09-17": ((1, 1, 0), (1, 1, 1, 80, 50, 30)),
    "2026-09-18": ((5, 4, 1), (4, 3, 5, 395, 220, 175)),
    "2026-09-19": ((2, 1, 1), (1, 1, 1, 100, 60, 40)),
    "2026-09-20": ((3, 3, 0), (3, 2, 4, 185, 130, 55)),
    "2026-09-21": ((2, 1, 1), (1, 1, 1, 60, 35, 25)),
}


@pytest.mark.parametrize("partition", SAMPLE_DAYS)
def test_per_partition_controls_at_every_hop(loaded, partition):
    want = ControlTuple(*EXPECTED[partition][1])
    wh = loaded.warehouse
    for spec in (FACT_SALES, AGG_DAILY_SALES, MART_FINANCE_DAILY_SALES, MART_EXECUTIVE_REVENUE):
        assert controls_of(wh, spec, [partition])[partition] == want, spec.name
    assert metric_revenue_of(wh, [partition])[partition] == want.revenue_usd


@pytest.mark.parametrize("partition", SAMPLE_DAYS)
def test_staged_accepted_quarantined_per_partition(loaded, partition):
    built = loaded.ledger.partitions.events(asset="stg_order_lines", partition=partition, states=(BUILT,))[-1].detail
    assert (built["raw_rows"], built["accepted"], built["quarantined"]) == EXPECTED[partition][0]
    assert built["manifest_rows"] == built["raw_rows"]


def test_totals_and_committed_source_seq(loaded):
    certified = [loaded.ledger.partitions.served("mart_finance_daily_sales", p).certification.controls for p in SAMPLE_DAYS]
    assert total(certified) == ControlTuple(10, 8, 12, 820, 495, 325)
    staged = [loaded.ledger.partitions.events(asset="stg_order_lines", partition=p, states=(BUILT,))[-1].detail for p in SAMPLE_DAYS]
    assert sum(s["raw_rows"] for s in staged) == 13
    assert sum(s["accepted"] for s in staged) == 10
    assert sum(s["quarantined"] for s in staged) == 3
    assert max(b["source_seq_high"] for b in loaded.ledger.batches.list()) == 208


def test_quarantine_reasons_are_the_documented_ones(loaded):
    rows = loaded.warehouse.read(QUARANTINE_ORDER_LINES, SAMPLE_DAYS).to_pylist()
    got = sorted((str(r["sales_date"]), r["order_id"], r["line_no"], r["source_seq"], r["reason"]) for r in rows)
    assert got == [
        ("2026-09-18", "O1001", 2, 200, "duplicate_key"),
        ("2026-09-19", "O1003", 2, 203, "non_positive_quantity"),
        ("2026-09-21", "O1007", 1, 208, "null_required_field"),
    ]


def test_marketplace_revenue_is_155(loaded):
    mart = read_certified(loaded.platform, "mart_executive_revenue")
    assert sum(mart.column("revenue_marketplace_usd").to_pylist()) == 155


def test_every_partition_is_certified_with_snapshot_fingerprint_and_controls(loaded):
    for partition in SAMPLE_DAYS:
        status = partition_status(loaded.platform, partition)
        assert status.state == "CERTIFIED" and status.certified_version == 1
        for asset in status.assets:
            cert = asset.served.certification
            assert cert.state == CERTIFIED and cert.snapshot_id and len(cert.fingerprint) == 64
            assert cert.run_id == loaded.outcome.run_id and cert.lane == "backfill"
            assert cert.controls == ControlTuple(*EXPECTED[partition][1])


def test_raw_rows_carry_batch_id_and_source_seq(loaded):
    from atlasmart_dagster.store.tables import RAW_ORDER_LINES

    raw = loaded.warehouse.read(RAW_ORDER_LINES, ["2026-09-18"]).to_pylist()
    assert [(r["batch_id"], r["source_seq"], r["source_row"]) for r in raw] == [
        ("ERP-20260918-01", 197 + i, 1 + i) for i in range(5)
    ]


def test_one_run_materialized_each_partition_of_each_asset(loaded):
    result = loaded.outcome.result
    materialized = {(e.asset_key.to_user_string(), e.partition) for e in result.get_asset_materialization_events()}
    for asset in ("raw_order_lines", "stg_order_lines", "quarantine_order_lines", "fact_sales",
                  "agg_daily_sales", "metric_gross_revenue", "mart_finance_daily_sales", "mart_executive_revenue"):
        assert {(asset, p) for p in SAMPLE_DAYS} <= materialized
