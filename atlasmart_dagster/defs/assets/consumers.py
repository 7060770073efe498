"""Consumers: dashboards and consumer groups, external to Dagster but part of the lineage.

They are not materialized here; declaring them as ``AssetSpec``s with owners
puts them in the asset graph, so the blast radius of any upstream problem
reaches the people who read the data, and notices know whom to tell.
"""

from __future__ import annotations

import dagster as dg

from ...store.tables import MART_EXECUTIVE_REVENUE, MART_FINANCE_DAILY_SALES, METRIC_GROSS_REVENUE

DASHBOARD_FINANCE = dg.AssetSpec(
    "dashboard_finance_daily_sales",
    deps=[MART_FINANCE_DAILY_SALES.name],
    description="BI dashboard: daily revenue, cost, profit and margin for the finance team.",
    group_name="consumers",
    owners=["team:finance-bi"],
    kinds={"dashboard"},
    metadata={"consumer_layer": "dashboard", "reads": "mart_finance_daily_sales (certified snapshots)"},
)

DASHBOARD_EXECUTIVE = dg.AssetSpec(
    "dashboard_executive_revenue",
    deps=[MART_EXECUTIVE_REVENUE.name, METRIC_GROSS_REVENUE.name],
    description="Executive KPI dashboard: governed revenue, channel split, margin, order value.",
    group_name="consumers",
    owners=["team:executive-reporting"],
    kinds={"dashboard"},
    metadata={"consumer_layer": "dashboard", "reads": "mart_executive_revenue, metric_gross_revenue"},
)

CONSUMERS_FINANCE = dg.AssetSpec(
    "consumer_group_finance",
    deps=[DASHBOARD_FINANCE.key.to_user_string(), MART_FINANCE_DAILY_SALES.name],
    description="Finance analysts and controllers (month-end close, revenue reporting).",
    group_name="consumers",
    owners=["team:finance"],
    kinds={"consumers"},
    metadata={"consumer_layer": "consumer_group", "contact": "finance-data@atlasmart.example"},
)

CONSUMERS_EXECUTIVE = dg.AssetSpec(
    "consumer_group_executives",
    deps=[DASHBOARD_EXECUTIVE.key.to_user_string()],
    description="Executive leadership team (daily revenue review).",
    group_name="consumers",
    owners=["team:executive-office"],
    kinds={"consumers"},
    metadata={"consumer_layer": "consumer_group", "contact": "exec-reporting@atlasmart.example"},
)

CONSUMER_SPECS = [DASHBOARD_FINANCE, DASHBOARD_EXECUTIVE, CONSUMERS_FINANCE, CONSUMERS_EXECUTIVE]
