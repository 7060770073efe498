"""Controls recomputed from raw: the independent answer every repair and restore is held against.

The raw table goes through the contract's quality gate and the fact's
"current paid line" rule again, in one query, without reading any published
layer; ``verify_partitions`` compares every layer's latest build (and the
governed metric) with that answer, day by day.
"""

from __future__ import annotations

from typing import Any

from ..domain.controls import FACT_CONTROLS_SQL, ControlTuple, controls_by_date, total
from ..store.platform import Platform
from ..store.tables import CONTROL_TUPLE, METRIC_GROSS_REVENUE, RAW_ORDER_LINES, REGISTRY
from ..store.warehouse import duckdb_connection
from ..transforms.staging import gate_sql
from .published_controls import controls_of, metric_revenue_of


def canonical_controls(platform: Platform, partitions: list[str]) -> dict[str, ControlTuple]:
    """Controls recomputed from the raw table through the contract rules, independent of every published layer."""
    con = duckdb_connection()
    try:
        platform.warehouse.register(con, RAW_ORDER_LINES, partitions, name="verify_raw")
        con.execute(f"CREATE OR REPLACE TEMP TABLE verify_gated AS {gate_sql('verify_raw')}")
        found = controls_by_date(
            con,
            FACT_CONTROLS_SQL,
            """(SELECT partition_date AS sales_date, order_id, quantity, line_amount_usd AS revenue_usd,
                       line_cost_usd AS cost_usd, line_amount_usd - line_cost_usd AS gross_profit_usd
                FROM (SELECT *, row_number() OVER (PARTITION BY partition_date, order_id, line_no
                                                   ORDER BY source_seq DESC, batch_id DESC, source_row DESC) AS newest
                      FROM verify_gated WHERE reason IS NULL)
                WHERE newest = 1 AND status = 'paid')""",
        )
        return {p: found.get(p, ControlTuple()) for p in partitions}
    finally:
        con.close()


def verify_partitions(platform: Platform, partitions: list[str]) -> dict[str, Any]:
    """Canonical controls vs every layer's latest build, per day and in total."""
    canonical = canonical_controls(platform, partitions)
    wh = platform.warehouse
    raw_rows = wh.partition_row_counts(RAW_ORDER_LINES, partitions)
    layers = {spec.name: controls_of(wh, spec, partitions) for spec in REGISTRY.specs(lambda s: s.controls == CONTROL_TUPLE)}
    metric = metric_revenue_of(wh, partitions)
    per_day, reconciled = {}, True
    for p in partitions:
        mismatches = [name for name, values in layers.items() if values[p] != canonical[p]]
        announced = [b["expected_rows"] for b in platform.ledger.batches.list(p)]
        if raw_rows[p] == 0 and (not announced or sum(announced) > 0):
            # zero raw rows are evidence only when the day's manifests announced zero (a no-sales day)
            mismatches.append("no raw evidence for this day")
        if metric[p] != canonical[p].revenue_usd:
            mismatches.append(METRIC_GROSS_REVENUE.name)
        reconciled &= not mismatches
        per_day[p] = {"canonical": str(canonical[p]), "mismatches": mismatches}
    return {"reconciled": reconciled, "per_day": per_day, "canonical_total": str(total(canonical.values()))}
