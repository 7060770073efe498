"""The pure-DuckDB reference: what this machine can do with no orchestration at all.

One script, one DuckDB connection: read the day's Parquet batches, apply the
same quality rules, keep the current paid line per key, write the facts and
the daily aggregate to Parquet, compute the control tuple and the canonical
fingerprint of the fact rows. No catalog, no ledger, no checks, no
certification, no Dagster. Ranges are processed in bounded chunks (a year at
once needs more memory than this machine has).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from ..domain.controls import ControlTuple
from ..product.fingerprints import fingerprint_relation
from ..store.warehouse import duckdb_connection

_GATE = """
CREATE OR REPLACE TEMP TABLE ref_fact AS
WITH typed AS (
    SELECT regexp_extract(filename, 'sales_date=([0-9-]+)', 1)::DATE AS partition_date, *
    FROM read_parquet({files}, filename = true)
),
valid AS (
    SELECT * FROM typed
    WHERE source_seq IS NOT NULL AND order_id IS NOT NULL AND line_no IS NOT NULL AND sales_date IS NOT NULL
      AND event_ts IS NOT NULL AND customer_id IS NOT NULL AND product_id IS NOT NULL AND channel IS NOT NULL
      AND quantity IS NOT NULL AND line_amount_usd IS NOT NULL AND line_cost_usd IS NOT NULL AND status IS NOT NULL
      AND sales_date = partition_date AND quantity > 0 AND line_amount_usd >= 0 AND line_cost_usd >= 0
      AND channel IN ('web', 'store', 'marketplace')
),
repeated AS (
    -- Only a key that arrives more than once needs the window (a sort); a key seen once is current.
    SELECT partition_date, order_id, line_no FROM valid GROUP BY ALL HAVING count(*) > 1
),
versions AS (
    SELECT *, lag(struct_pack(sales_date, event_ts, customer_id, product_id, channel, quantity, line_amount_usd,
                              line_cost_usd, status)) OVER w AS prev,
              struct_pack(sales_date, event_ts, customer_id, product_id, channel, quantity, line_amount_usd,
                          line_cost_usd, status) AS cur,
              lag(source_seq) OVER w AS prev_seq
    FROM valid SEMI JOIN repeated USING (partition_date, order_id, line_no)
    WINDOW w AS (PARTITION BY partition_date, order_id, line_no ORDER BY source_seq)
),
accepted AS (SELECT * FROM versions WHERE prev_seq IS NULL OR prev IS DISTINCT FROM cur),
current AS (
    SELECT * FROM valid ANTI JOIN repeated USING (partition_date, order_id, line_no)
    UNION ALL BY NAME
    SELECT * EXCLUDE (rn, prev, cur, prev_seq) FROM (
        SELECT *, row_number() OVER (PARTITION BY partition_date, order_id, line_no ORDER BY source_seq DESC) AS rn
        FROM accepted
    ) WHERE rn = 1
)
SELECT partition_date AS sales_date, order_id, line_no, event_ts, customer_id, product_id, channel, quantity,
       line_amount_usd AS revenue_usd, line_cost_usd AS cost_usd,
       (line_amount_usd - line_cost_usd)::DECIMAL(18,2) AS gross_profit_usd, source_seq
FROM current WHERE status = 'paid'
"""


def run_reference(landing: Path, days: Sequence[str], out: Path, chunk_days: int = 20) -> dict:
    """Process ``days``; returns seconds, controls and fact fingerprints per day."""
    out.mkdir(parents=True, exist_ok=True)
    con = duckdb_connection()
    started = time.perf_counter()
    controls: dict[str, ControlTuple] = {}
    fingerprints: dict[str, str] = {}
    for start in range(0, len(days), chunk_days):
        chunk = list(days[start : start + chunk_days])
        files = "[" + ", ".join(f"'{landing / f'sales_date={d}' / 'order_lines.parquet'}'" for d in chunk) + "]"
        con.execute(_GATE.format(files=files))
        con.execute(f"COPY ref_fact TO '{out / f'fact_{start:04d}.parquet'}' (FORMAT parquet)")
        con.execute(
            "CREATE OR REPLACE TEMP TABLE ref_agg AS SELECT sales_date, count(*) AS paid_lines, "
            "count(DISTINCT order_id) AS orders, sum(quantity) AS units, sum(revenue_usd) AS revenue_usd, "
            "sum(cost_usd) AS cost_usd, sum(gross_profit_usd) AS gross_profit_usd FROM ref_fact GROUP BY sales_date"
        )
        con.execute(f"COPY ref_agg TO '{out / f'agg_{start:04d}.parquet'}' (FORMAT parquet)")
        for row in con.sql("SELECT * FROM ref_agg").fetchall():
            controls[row[0].isoformat()] = ControlTuple.from_row(row[1:])
        for day in chunk:
            con.execute(f"CREATE OR REPLACE TEMP VIEW ref_day AS SELECT * FROM ref_fact WHERE sales_date = DATE '{day}'")
            fingerprints[day] = fingerprint_relation(con, "ref_day", ("order_id", "line_no"))
    seconds = time.perf_counter() - started
    con.close()
    return {"seconds": seconds, "controls": controls, "fingerprints": fingerprints}
