"""fact_sales: the current accepted paid version of each order line."""

from __future__ import annotations

from ..domain.contracts import PAID_STATUS


def fact_sales_sql(staged: str = "stg_order_lines") -> str:
    return f"""
        SELECT sales_date, order_id, line_no, event_ts, customer_id, product_id, channel, quantity,
               line_amount_usd AS revenue_usd,
               line_cost_usd AS cost_usd,
               (line_amount_usd - line_cost_usd)::DECIMAL(18,2) AS gross_profit_usd,
               batch_id, source_seq
        FROM {staged}
        WHERE is_current AND status = '{PAID_STATUS}'
        """
