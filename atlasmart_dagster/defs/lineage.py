"""Column lineage of every layer, declared once and attached to the assets as metadata.

Each entry maps a column of an asset to the upstream (asset, column) pairs it
is computed from. Dagster shows it in the UI (``dagster/column_lineage``), and
the blast radius of a *source field* follows it: a change to the ERP's
``line_amount_usd`` reaches exactly the columns and assets built from it.
"""

from __future__ import annotations

import dagster as dg

from ..domain.contracts import CANONICAL_NAMES, CHANNELS
from ..domain.controls import CONTROL_FIELDS
from ..store.tables import (
    AGG_DAILY_SALES,
    FACT_SALES,
    MART_EXECUTIVE_REVENUE,
    MART_FINANCE_DAILY_SALES,
    METRIC_GROSS_REVENUE,
    QUARANTINE_ORDER_LINES,
    RAW_ORDER_LINES,
    STG_ORDER_LINES,
)

SOURCE = "erp_order_lines"
RAW = RAW_ORDER_LINES.name
STG = STG_ORDER_LINES.name
QUARANTINE = QUARANTINE_ORDER_LINES.name
FACT = FACT_SALES.name
AGG = AGG_DAILY_SALES.name
METRIC = METRIC_GROSS_REVENUE.name
FINANCE = MART_FINANCE_DAILY_SALES.name
EXECUTIVE = MART_EXECUTIVE_REVENUE.name

_STAGED = ("order_id", "line_no", "source_seq", "event_ts", "customer_id", "product_id", "channel", "quantity",
           "line_amount_usd", "line_cost_usd", "status")


def _raw() -> dict:
    lineage = {("row_sales_date" if f == "sales_date" else f): [(SOURCE, f)] for f in CANONICAL_NAMES}
    lineage["partition_date"] = [(SOURCE, "sales_date")]
    lineage["type_error_fields"] = [(SOURCE, f) for f in CANONICAL_NAMES]
    return lineage


def _staged(target_extra: dict) -> dict:
    lineage = {c: [(RAW, c)] for c in _STAGED}
    lineage["sales_date"] = [(RAW, "partition_date")]
    lineage.update(target_extra)
    return lineage


COLUMN_LINEAGE: dict[str, dict[str, list[tuple[str, str]]]] = {
    RAW: _raw(),
    STG: _staged({"is_current": [(RAW, "source_seq"), (RAW, "order_id"), (RAW, "line_no")]}),
    QUARANTINE: _staged({"reason": [(RAW, c) for c in _STAGED] + [(RAW, "type_error_fields")],
                         "row_sales_date": [(RAW, "row_sales_date")]}),
    FACT: {
        **{c: [(STG, c)] for c in ("sales_date", "order_id", "line_no", "event_ts", "customer_id", "product_id",
                                   "channel", "quantity", "source_seq")},
        "revenue_usd": [(STG, "line_amount_usd")],
        "cost_usd": [(STG, "line_cost_usd")],
        "gross_profit_usd": [(STG, "line_amount_usd"), (STG, "line_cost_usd")],
    },
    AGG: {
        "sales_date": [(FACT, "sales_date")],
        "paid_lines": [(FACT, "order_id"), (FACT, "line_no")],
        "orders": [(FACT, "order_id")],
        "units": [(FACT, "quantity")],
        "revenue_usd": [(FACT, "revenue_usd")],
        "cost_usd": [(FACT, "cost_usd")],
        "gross_profit_usd": [(FACT, "gross_profit_usd")],
    },
    METRIC: {
        "sales_date": [(FACT, "sales_date")],
        "channel": [(FACT, "channel")],
        "value_usd": [(FACT, "revenue_usd"), (FACT, "channel")],
    },
    FINANCE: {
        **{c: [(AGG, c)] for c in CONTROL_FIELDS if c != "revenue_usd"},
        "sales_date": [(AGG, "sales_date")],
        "revenue_usd": [(METRIC, "value_usd")],
        "gross_margin_pct": [(AGG, "gross_profit_usd"), (METRIC, "value_usd")],
    },
    EXECUTIVE: {
        **{c: [(AGG, c)] for c in ("paid_lines", "orders", "units", "cost_usd", "gross_profit_usd")},
        "sales_date": [(AGG, "sales_date")],
        "revenue_usd": [(METRIC, "value_usd")],
        **{f"revenue_{c}_usd": [(METRIC, "value_usd"), (METRIC, "channel")] for c in CHANNELS},
        "gross_margin_pct": [(AGG, "gross_profit_usd"), (METRIC, "value_usd")],
        "avg_order_value_usd": [(METRIC, "value_usd"), (AGG, "orders")],
    },
}


def column_lineage(asset: str, lineage: dict[str, list[tuple[str, str]]] | None = None) -> dg.TableColumnLineage:
    """The ``dagster/column_lineage`` metadata value of ``asset`` (declared here, or given as ``lineage``)."""
    if lineage is None and asset not in COLUMN_LINEAGE:
        raise KeyError(f"no column lineage for {asset}: declare it in defs/lineage.py or pass it to its asset")
    return dg.TableColumnLineage(
        deps_by_column={
            column: [dg.TableColumnDep(asset_key=dg.AssetKey(a), column_name=c) for a, c in deps]
            for column, deps in (lineage if lineage is not None else COLUMN_LINEAGE[asset]).items()
        }
    )


def lineage_metadata(asset: str, lineage: dict[str, list[tuple[str, str]]] | None = None) -> dict:
    return {"dagster/column_lineage": column_lineage(asset, lineage)}
