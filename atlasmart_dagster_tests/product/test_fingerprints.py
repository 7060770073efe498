import datetime as dt
from decimal import Decimal

import pyarrow as pa

from atlasmart_dagster.product.fingerprints import fingerprint_arrow

UTC = dt.timezone.utc


def rows(order_ids, amounts, notes=None):
    n = len(order_ids)
    return pa.table({
        "sales_date": pa.array([dt.date(2026, 9, 20)] * n, pa.date32()),
        "order_id": pa.array(order_ids, pa.string()),
        "amount": pa.array([None if a is None else Decimal(a) for a in amounts], pa.decimal128(18, 2)),
        "ts": pa.array([dt.datetime(2026, 9, 20, 6, 40, tzinfo=UTC)] * n, pa.timestamp("us", tz="UTC")),
        "note": pa.array(notes or [""] * n, pa.string()),
    })


def test_same_rows_in_any_order_give_the_same_fingerprint():
    a = fingerprint_arrow(rows(["O1", "O2"], ["1.00", "2.00"]), ["order_id"])
    b = fingerprint_arrow(rows(["O2", "O1"], ["2.00", "1.00"]), ["order_id"])
    assert a == b and len(a) == 64


def test_any_changed_value_changes_the_fingerprint():
    base = fingerprint_arrow(rows(["O1", "O2"], ["1.00", "2.00"]), ["order_id"])
    assert fingerprint_arrow(rows(["O1", "O2"], ["1.00", "2.01"]), ["order_id"]) != base
    assert fingerprint_arrow(rows(["O1"], ["1.00"]), ["order_id"]) != base


def test_null_empty_and_separator_text_are_distinguished():
    null_vs_empty = {
        fingerprint_arrow(rows(["O1"], ["1.00"], [None]), ["order_id"]),
        fingerprint_arrow(rows(["O1"], ["1.00"], [""]), ["order_id"]),
        fingerprint_arrow(rows(["O1"], ["1.00"], ["\\N"]), ["order_id"]),
    }
    assert len(null_vs_empty) == 3
    # "a|b" in one field must not equal "a" and "b" in two fields
    joined = fingerprint_arrow(rows(["O1|x"], ["1.00"], ["y"]), ["order_id"])
    split = fingerprint_arrow(rows(["O1"], ["1.00"], ["x|y"]), ["order_id"])
    assert joined != split


def test_column_names_are_part_of_the_fingerprint():
    t = rows(["O1"], ["1.00"])
    renamed = t.rename_columns(["sales_date", "order_id", "amount_usd", "ts", "note"])
    assert fingerprint_arrow(t, ["order_id"]) != fingerprint_arrow(renamed, ["order_id"])


def test_per_partition_fingerprints_equal_one_partition_at_a_time():
    from atlasmart_dagster.product.fingerprints import fingerprint_relation, fingerprints_by_partition
    from atlasmart_dagster.store.warehouse import duckdb_connection

    con = duckdb_connection()
    con.execute(
        "CREATE TEMP TABLE t AS SELECT DATE '2026-09-17' + (i % 5)::INT AS sales_date, 'O' || (i // 5) AS order_id, "
        "(i * 7 % 100)::DECIMAL(18,2) AS amount FROM range(5000) r(i)"
    )
    together = fingerprints_by_partition(con, "t", "sales_date", ("order_id",))
    one_by_one = {
        str(day): fingerprint_relation(con, f"(SELECT * FROM t WHERE sales_date = DATE '{day}')", ("order_id",))
        for (day,) in con.sql("SELECT DISTINCT sales_date FROM t").fetchall()
    }
    assert together == one_by_one and len(together) == 5
