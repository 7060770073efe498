import datetime as dt
from decimal import Decimal

import pyarrow as pa

from atlasmart_dagster.fingerprint import fingerprint_arrow

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
