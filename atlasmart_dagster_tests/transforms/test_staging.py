"""The quality gate, rule by rule, on rows read exactly as the raw layer reads them."""

import json

import pytest

from atlasmart_dagster.domain.contracts import CANONICAL_NAMES, CONTRACT_V1
from atlasmart_dagster.store.landing import present_fields, read_batch
from atlasmart_dagster.store.warehouse import duckdb_connection
from atlasmart_dagster.transforms.staging import gate_tables

DAY = "2026-09-20"


def line(seq, order="O1", line_no=1, **changes):
    row = {
        "source_seq": seq, "order_id": order, "line_no": line_no, "sales_date": DAY,
        "event_ts": "2026-09-20T10:00:00Z", "customer_id": "C1", "product_id": "P1", "channel": "web",
        "quantity": 1, "line_amount_usd": "10.00", "line_cost_usd": "6.00", "status": "paid",
    }
    row.update(changes)
    return row


def gate(tmp_path, rows):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    con = duckdb_connection()
    raw = read_batch(con, path, "jsonl", present_fields(con, path, "jsonl"), CONTRACT_V1, DAY, "B1")
    con.register("raw_order_lines", raw)
    staged, quarantined = gate_tables(con)
    return staged.to_pylist(), quarantined.to_pylist()


@pytest.mark.parametrize(
    "changes,reason,detail",
    [
        ({"quantity": "two"}, "type_error", "quantity"),
        ({"product_id": None}, "null_required_field", "product_id"),
        ({"sales_date": "2026-09-19"}, "wrong_partition", "sales_date 2026-09-19"),
        ({"quantity": 0}, "non_positive_quantity", "quantity 0"),
        ({"quantity": -2}, "non_positive_quantity", "quantity -2"),
        ({"line_cost_usd": "-1.00"}, "negative_amount", "line_cost_usd"),
        ({"channel": "fax"}, "unknown_channel", "channel fax"),
    ],
)
def test_each_rule_quarantines_with_its_reason(tmp_path, changes, reason, detail):
    staged, quarantined = gate(tmp_path, [line(1, order="OK"), line(2, **changes)])
    assert [r["order_id"] for r in staged] == ["OK"]
    (row,) = quarantined
    assert (row["reason"], row["reason_detail"], row["source_seq"]) == (reason, detail, 2)


def test_exact_resend_is_a_duplicate_of_the_earlier_sequence(tmp_path):
    staged, quarantined = gate(tmp_path, [line(199), line(200)])
    assert [(r["source_seq"], r["is_current"]) for r in staged] == [(199, True)]
    assert [(q["reason"], q["reason_detail"]) for q in quarantined] == [("duplicate_key", "exact re-send of source_seq 199")]


def test_later_different_version_supersedes_and_earlier_stays_as_history(tmp_path):
    staged, quarantined = gate(tmp_path, [line(10), line(11, line_amount_usd="12.00")])
    assert quarantined == []
    assert [(r["source_seq"], r["is_current"]) for r in staged] == [(10, False), (11, True)]


def test_non_paid_lines_are_accepted(tmp_path):
    staged, quarantined = gate(tmp_path, [line(1, status="refunded")])
    assert quarantined == [] and staged[0]["status"] == "refunded"


def test_every_row_lands_in_exactly_one_output(tmp_path):
    rows = [line(i, order=f"O{i % 4}", line_no=1, quantity=i % 3) for i in range(1, 40)]
    staged, quarantined = gate(tmp_path, rows)
    assert len(staged) + len(quarantined) == len(rows)
    assert {r["source_seq"] for r in staged}.isdisjoint({q["source_seq"] for q in quarantined})


def test_the_order_of_rules_decides_the_single_reason(tmp_path):
    # null product AND zero quantity AND unknown channel: the null field wins
    _, (row,) = gate(tmp_path, [line(1, product_id=None, quantity=0, channel="fax")])
    assert row["reason"] == "null_required_field"


def test_all_canonical_fields_are_required(tmp_path):
    for name in CANONICAL_NAMES:
        if name == "source_seq":
            continue
        _, quarantined = gate(tmp_path, [line(1, **{name: None})])
        assert quarantined[0]["reason"] == "null_required_field", name
