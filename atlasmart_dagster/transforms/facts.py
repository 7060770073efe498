"""fact_sales: the current accepted paid version of each order line."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from ..contracts import PAID_STATUS


def build_fact_sales(con: duckdb.DuckDBPyConnection, staged: str = "stg_order_lines") -> pa.Table:
    return con.sql(
        f"""
        SELECT sales_date, order_id, line_no, event_ts, customer_id, product_id, channel, quantity,
               line_amount_usd AS revenue_usd,
               line_cost_usd AS cost_usd,
               (line_amount_usd - line_cost_usd)::DECIMAL(18,2) AS gross_profit_usd,
               batch_id, source_seq
        FROM {staged}
        WHERE is_current AND status = '{PAID_STATUS}'
        ORDER BY sales_date, order_id, line_no
        """
    ).to_arrow_table()
