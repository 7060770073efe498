"""Faults that drills inject on purpose, each the smallest honest imitation of a real failure."""

from __future__ import annotations

import pyarrow as pa

from ..store.platform import Platform
from ..store.tables import AGG_DAILY_SALES


def corrupt_aggregate_cost(platform: Platform, partition: str, delta_usd: int) -> int:
    """Publish a bad version of agg_daily_sales for one day: cost off by ``delta_usd``.

    Imitates a buggy write of the aggregate (profit moves with the cost, as a
    plausible bug would keep the row internally consistent). Returns the
    snapshot id of the bad version.
    """
    rows = platform.warehouse.read(AGG_DAILY_SALES, [partition]).to_pylist()
    if not rows:
        raise ValueError(f"agg_daily_sales has no row for {partition} to corrupt")
    for row in rows:
        row["cost_usd"] += delta_usd
        row["gross_profit_usd"] -= delta_usd
    bad = pa.Table.from_pylist(rows, AGG_DAILY_SALES.arrow_schema())
    return platform.warehouse.overwrite(AGG_DAILY_SALES, bad, [partition], {"run_id": "drill-fault", "fault": "cost"})
