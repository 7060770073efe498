"""Jobs: the daily chain in the current lane, the same chain in the backfill lane, reference data."""

from __future__ import annotations

import dagster as dg

from ...product.lanes import BACKFILL, CURRENT, LANE_TAG
from ..checks.golden_checks import GOLDEN_CHECK_KEYS
from ..checks.slo_checks import SLO_CHECK_KEYS

DAILY_CHAIN = (
    "raw_order_lines",
    "stg_order_lines",
    "quarantine_order_lines",
    "fact_sales",
    "agg_daily_sales",
    "metric_gross_revenue",
    "mart_finance_daily_sales",
    "mart_executive_revenue",
)

# SLO checks are measured after certification, not inside the load run.
daily_sales_chain = dg.AssetSelection.assets(*DAILY_CHAIN) - dg.AssetSelection.checks(*SLO_CHECK_KEYS)

daily_sales_job = dg.define_asset_job(
    "daily_sales_job",
    selection=daily_sales_chain,
    description="Load one business day end to end in the current lane: raw -> staging -> fact -> agg -> metric -> marts.",
    tags={LANE_TAG: CURRENT},
)

backfill_sales_job = dg.define_asset_job(
    "backfill_sales_job",
    selection=daily_sales_chain,
    description=(
        "Rebuild a range of historical days in the backfill lane (one run for the whole range). "
        "Refuses the current day unless tagged atlasmart/include_current=true."
    ),
    tags={LANE_TAG: BACKFILL},
)

dashboard_checks_job = dg.define_asset_job(
    "dashboard_checks_job",
    selection=dg.AssetSelection.checks(*GOLDEN_CHECK_KEYS),
    description=(
        "Golden cross-checks of the dashboards against the governed metric, on the certified consumer layer. "
        "Started by certification_sensor after each certification; passing days certify the dashboards."
    ),
)

reference_job = dg.define_asset_job(
    "reference_job",
    selection=dg.AssetSelection.assets("dim_customer", "dim_product"),
    description="Reload the customer and product dimensions from the reference extracts.",
)
