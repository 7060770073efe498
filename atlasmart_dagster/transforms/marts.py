"""Certified marts, built from the aggregate and the governed metric only.

Revenue in both marts is the governed metric, never recomputed from facts; the
other controls come from agg_daily_sales. The reconciliation checks prove the
two agree before anything is certified.
"""

from __future__ import annotations

from ..domain.contracts import CHANNELS
from ..domain.governed_metrics import GROSS_REVENUE

_MARGIN = "CASE WHEN r.revenue_usd = 0 THEN 0 ELSE round(a.gross_profit_usd * 100 / r.revenue_usd, 2) END"


def _governed_revenue(metric: str) -> str:
    splits = ", ".join(
        f"sum(value_usd) FILTER (WHERE channel = '{c}')::DECIMAL(18,2) AS revenue_{c}_usd" for c in CHANNELS
    )
    return (
        f"SELECT sales_date, sum(value_usd)::DECIMAL(18,2) AS revenue_usd, {splits}, "
        f"any_value(metric_version) AS metric_version "
        f"FROM {metric} WHERE metric_name = '{GROSS_REVENUE.name}' GROUP BY sales_date"
    )


def finance_mart_sql(agg: str = "agg_daily_sales", metric: str = "metric_gross_revenue") -> str:
    return f"""
        SELECT a.sales_date, a.paid_lines, a.orders, a.units,
               r.revenue_usd, a.cost_usd, a.gross_profit_usd,
               ({_MARGIN})::DECIMAL(9,2) AS gross_margin_pct,
               r.metric_version
        FROM {agg} a JOIN ({_governed_revenue(metric)}) r USING (sales_date)
        """


def executive_mart_sql(agg: str = "agg_daily_sales", metric: str = "metric_gross_revenue") -> str:
    splits = ", ".join(f"r.revenue_{c}_usd" for c in CHANNELS)
    return f"""
        SELECT a.sales_date, r.revenue_usd, {splits},
               a.gross_profit_usd,
               ({_MARGIN})::DECIMAL(9,2) AS gross_margin_pct,
               a.orders,
               (CASE WHEN a.orders = 0 THEN 0 ELSE round(r.revenue_usd / a.orders, 2) END)::DECIMAL(18,2)
                   AS avg_order_value_usd,
               a.paid_lines, a.units, a.cost_usd,
               r.metric_version
        FROM {agg} a JOIN ({_governed_revenue(metric)}) r USING (sales_date)
        """
