"""The quality gate: raw rows -> accepted versions (staging) + quarantine.

Rules, in the order a row is judged (the first that applies is its reason):

1. ``type_error``            a value failed to cast to its contract type
2. ``null_required_field``   a required field is NULL
3. ``wrong_partition``       the row's sales_date is not the batch's day
4. ``non_positive_quantity`` quantity <= 0
5. ``negative_amount``       line amount or cost below zero
6. ``out_of_range``          quantity or money beyond the contract's bounds
7. ``unknown_channel``       channel outside the contract's list
8. ``unknown_status``        status outside the contract's closed set (``PAID``,
                             ``paid `` and ``payed`` are not ``paid``)
9. ``duplicate_key``         an exact re-send: same key and same content as the
                             previous version of that key, later source_seq

Rows that pass are *accepted*. Of the accepted versions of one
``(order_id, line_no)`` the one with the highest ``source_seq`` is current;
earlier ones stay in staging as history (``is_current = false``). Every raw
row ends in exactly one of the two outputs, so staged = accepted + quarantined.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import pyarrow as pa

from ..domain.contracts import CANONICAL_NAMES, CHANNELS, MAX_LINE_USD, MAX_QUANTITY, STATUSES

REASONS = (
    "type_error",
    "null_required_field",
    "wrong_partition",
    "non_positive_quantity",
    "negative_amount",
    "out_of_range",
    "unknown_channel",
    "unknown_status",
    "duplicate_key",
)

_CONTENT = (
    "row_sales_date, event_ts, customer_id, product_id, channel, quantity, line_amount_usd, line_cost_usd, status"
)


def _required_fields() -> list[str]:
    return ["row_sales_date" if n == "sales_date" else n for n in CANONICAL_NAMES]


def gate_sql(raw: str = "raw_order_lines") -> str:
    """SQL that labels every raw row with its gate outcome (reason NULL = accepted)."""
    required = _required_fields()
    any_null = " OR ".join(f"{c} IS NULL" for c in required)
    null_list = ", ".join(
        f"CASE WHEN {c} IS NULL THEN '{'sales_date' if c == 'row_sales_date' else c}' END" for c in required
    )
    channels = ", ".join(f"'{c}'" for c in CHANNELS)
    statuses = ", ".join(f"'{c}'" for c in STATUSES)
    out_of_range = f"quantity > {MAX_QUANTITY} OR line_amount_usd > {MAX_LINE_USD} OR line_cost_usd > {MAX_LINE_USD}"
    return f"""
WITH judged AS (
    SELECT *,
        CASE
            WHEN type_error_fields IS NOT NULL THEN 'type_error'
            WHEN {any_null} THEN 'null_required_field'
            WHEN row_sales_date <> partition_date THEN 'wrong_partition'
            WHEN quantity <= 0 THEN 'non_positive_quantity'
            WHEN line_amount_usd < 0 OR line_cost_usd < 0 THEN 'negative_amount'
            WHEN {out_of_range} THEN 'out_of_range'
            WHEN channel NOT IN ({channels}) THEN 'unknown_channel'
            WHEN status NOT IN ({statuses}) THEN 'unknown_status'
        END AS rule_reason,
        CASE
            WHEN type_error_fields IS NOT NULL THEN type_error_fields
            WHEN {any_null} THEN concat_ws(',', {null_list})
            WHEN row_sales_date <> partition_date THEN 'sales_date ' || row_sales_date::VARCHAR
            WHEN quantity <= 0 THEN 'quantity ' || quantity::VARCHAR
            WHEN line_amount_usd < 0 OR line_cost_usd < 0 THEN concat_ws(',',
                CASE WHEN line_amount_usd < 0 THEN 'line_amount_usd' END,
                CASE WHEN line_cost_usd < 0 THEN 'line_cost_usd' END)
            WHEN {out_of_range} THEN concat_ws(',',
                CASE WHEN quantity > {MAX_QUANTITY} THEN 'quantity ' || quantity::VARCHAR END,
                CASE WHEN line_amount_usd > {MAX_LINE_USD} THEN 'line_amount_usd ' || line_amount_usd::VARCHAR END,
                CASE WHEN line_cost_usd > {MAX_LINE_USD} THEN 'line_cost_usd ' || line_cost_usd::VARCHAR END)
            WHEN channel NOT IN ({channels}) THEN 'channel ' || channel
            WHEN status NOT IN ({statuses}) THEN 'status ' || to_json(status)::VARCHAR
        END AS rule_detail
    FROM {raw}
),
repeated AS (
    -- Most keys arrive once: such a row has no previous version and is current by definition.
    -- Only the rows of a key that arrives more than once need the window (a sort); finding
    -- those keys is a hash aggregate, cheaper than sorting every row of the chunk.
    SELECT partition_date, order_id, line_no, count(*) AS key_rows
    FROM judged GROUP BY ALL HAVING count(*) > 1
),
versions AS (
    SELECT judged.*, NULL::BIGINT AS previous_seq, NULL AS previous_content, 1::BIGINT AS key_rows
    FROM judged ANTI JOIN repeated USING (partition_date, order_id, line_no)
    UNION ALL BY NAME
    -- Invalid rows carry no content, and IGNORE NULLS makes each valid row see the
    -- previous *valid* version of its key.
    SELECT judged.*,
        lag(CASE WHEN rule_reason IS NULL THEN source_seq END IGNORE NULLS) OVER key_order AS previous_seq,
        lag(CASE WHEN rule_reason IS NULL THEN struct_pack({_CONTENT}) END IGNORE NULLS) OVER key_order
            AS previous_content,
        repeated.key_rows
    FROM judged JOIN repeated USING (partition_date, order_id, line_no)
    WINDOW key_order AS (PARTITION BY partition_date, order_id, line_no ORDER BY source_seq, batch_id, source_row)
)
SELECT * EXCLUDE (previous_seq, previous_content),
    coalesce(rule_reason, CASE WHEN previous_seq IS NOT NULL
                               AND previous_content IS NOT DISTINCT FROM struct_pack({_CONTENT})
                          THEN 'duplicate_key' END) AS reason,
    coalesce(rule_detail, CASE WHEN previous_seq IS NOT NULL
                               AND previous_content IS NOT DISTINCT FROM struct_pack({_CONTENT})
                          THEN 'exact re-send of source_seq ' || previous_seq::VARCHAR END) AS reason_detail
FROM versions
"""


# The newest accepted version of a key is current. Most keys have one row
# (current by definition); only keys with several rows need the window.
_STAGED = """
SELECT partition_date AS sales_date, order_id, line_no, source_seq, batch_id, source_row,
       event_ts, customer_id, product_id, channel, quantity, line_amount_usd, line_cost_usd, status,
       true AS is_current
FROM {gated}
WHERE reason IS NULL AND key_rows = 1
UNION ALL
SELECT partition_date AS sales_date, order_id, line_no, source_seq, batch_id, source_row,
       event_ts, customer_id, product_id, channel, quantity, line_amount_usd, line_cost_usd, status,
       row_number() OVER (
           PARTITION BY partition_date, order_id, line_no
           ORDER BY source_seq DESC, batch_id DESC, source_row DESC) = 1 AS is_current
FROM {gated}
WHERE reason IS NULL AND key_rows > 1
"""

_QUARANTINED = """
SELECT partition_date AS sales_date, batch_id, source_row, source_seq, order_id, line_no,
       reason, reason_detail, row_sales_date, event_ts, customer_id, product_id, channel, quantity,
       line_amount_usd, line_cost_usd, status, invalid_values_json
FROM {gated}
WHERE reason IS NOT NULL
"""


def run_gate(con: duckdb.DuckDBPyConnection, raw: str = "raw_order_lines", table: str = "gated",
             shared: bool = False) -> tuple[str, str]:
    """Judge every raw row into ``table``; return (staged SQL, quarantined SQL) over it.

    ``table`` is a temp table of ``con``; with ``shared`` it is a table every
    cursor of the engine can read (the caller drops it), so each day's rows can
    be written on a cursor of its own (``day_queries``).
    """
    con.execute(f"CREATE OR REPLACE {'TABLE' if shared else 'TEMP TABLE'} {table} AS {gate_sql(raw)}")
    return _STAGED.format(gated=table), _QUARANTINED.format(gated=table)


@contextmanager
def shared_gate_table(con: duckdb.DuckDBPyConnection) -> Iterator[str]:
    """A name for ``run_gate(..., shared=True)``'s table, unique to the caller; the table is dropped when the block ends."""
    table = f"main.__gated_{uuid.uuid4().hex}"
    try:
        yield table
    finally:
        con.execute(f"DROP TABLE IF EXISTS {table}")


def day_queries(sql: str, days: list[str]) -> dict[str, str]:
    """``sql`` (a gate output, whose day is ``sales_date``) as one query per day: what a day alone would publish.

    Every window of the gate partitions by the day, so a day's rows are the
    same whether the gate judged it alone or inside a range.
    """
    return {day: f"SELECT * FROM ({sql}) WHERE sales_date = DATE '{day}'" for day in days}


def gate_tables(con: duckdb.DuckDBPyConnection, raw: str = "raw_order_lines") -> tuple[pa.Table, pa.Table]:
    """(accepted staging rows, quarantined rows) as Arrow, in canonical order (for tests and tools)."""
    staged, quarantined = run_gate(con, raw)
    return (
        con.sql(staged + " ORDER BY sales_date, order_id, line_no, source_seq, batch_id, source_row").to_arrow_table(),
        con.sql(quarantined + " ORDER BY sales_date, batch_id, source_row").to_arrow_table(),
    )
