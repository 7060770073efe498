"""agg_daily_sales: one row per sales_date with the control tuple.

Every loaded day gets a row, also a day with no paid lines (zeros): a day the
pipeline processed and found empty is different from a day never loaded.
"""

from __future__ import annotations

from typing import Sequence

from ..domain.controls import FACT_CONTROLS_SQL


def days_relation(partitions: Sequence[str]) -> str:
    """A one-column relation ``sales_date`` listing the partitions being built."""
    values = ", ".join(f"(DATE '{p}')" for p in partitions)
    return f"(SELECT * FROM (VALUES {values}) AS d(sales_date))"


def agg_daily_sales_sql(partitions: Sequence[str], fact: str = "fact_sales") -> str:
    controls = FACT_CONTROLS_SQL.format(source=fact)
    return f"""
        SELECT d.sales_date,
               coalesce(c.paid_lines, 0)::BIGINT AS paid_lines,
               coalesce(c.orders, 0)::BIGINT AS orders,
               coalesce(c.units, 0)::BIGINT AS units,
               coalesce(c.revenue_usd, 0)::DECIMAL(18,2) AS revenue_usd,
               coalesce(c.cost_usd, 0)::DECIMAL(18,2) AS cost_usd,
               coalesce(c.gross_profit_usd, 0)::DECIMAL(18,2) AS gross_profit_usd
        FROM {days_relation(partitions)} d
        LEFT JOIN ({controls}) c USING (sales_date)
        """
