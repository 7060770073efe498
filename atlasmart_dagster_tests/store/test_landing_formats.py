"""The landing zone accepts JSON Lines, CSV and Parquet batches with the same meaning."""

import csv
import io

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from atlasmart_dagster.domain.controls import ControlTuple
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.published_controls import controls_of
from atlasmart_dagster.store.tables import FACT_SALES, QUARANTINE_ORDER_LINES
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAY = "2026-09-18"


def as_csv(rows):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode()


def as_parquet(rows):
    con = duckdb.connect()
    table = pa.Table.from_pylist(rows)
    con.register("t", table)
    typed = con.sql(
        "SELECT source_seq::BIGINT source_seq, order_id, line_no::INTEGER line_no, sales_date::DATE sales_date, "
        "event_ts::TIMESTAMPTZ event_ts, customer_id, product_id, channel, quantity::INTEGER quantity, "
        "line_amount_usd::DECIMAL(18,2) line_amount_usd, line_cost_usd::DECIMAL(18,2) line_cost_usd, status FROM t"
    ).to_arrow_table()
    sink = pa.BufferOutputStream()
    pq.write_table(typed, sink)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("name,encode", [("order_lines.csv", as_csv), ("order_lines.parquet", as_parquet)])
def test_same_batch_in_another_format_gives_the_same_figures(env, name, encode):
    day_dir = env.day_dir(DAY)
    rows = read_rows(day_dir)
    (day_dir / "order_lines.jsonl").unlink()
    write_batch(day_dir, rows, data=encode(rows), name=name, batch_id="ERP-20260918-01")
    outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
    assert outcome.success, outcome.failures
    assert controls_of(env.warehouse, FACT_SALES, [DAY])[DAY] == ControlTuple(4, 3, 5, 395, 220, 175)
    reasons = env.warehouse.read(QUARANTINE_ORDER_LINES, [DAY]).column("reason").to_pylist()
    assert reasons == ["duplicate_key"]
    assert outcome.certified == [DAY]
