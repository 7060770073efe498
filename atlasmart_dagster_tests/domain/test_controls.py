from decimal import Decimal

import pyarrow as pa
import pytest

from atlasmart_dagster.domain.controls import FACT_CONTROLS_SQL, ControlTuple, controls_by_date, format_money, total
from atlasmart_dagster.store.warehouse import duckdb_connection


def test_str_prints_money_without_trailing_zeros():
    assert str(ControlTuple(10, 8, 12, "820.00", "495.00", "325.00")) == "(10, 8, 12, 820, 495, 325)"
    assert format_money(Decimal("12.50")) == "12.5"


def test_json_keeps_money_exact():
    c = ControlTuple(1, 1, 1, Decimal("0.10"), Decimal("0.20"), Decimal("-0.10"))
    assert c.to_json() == {
        "paid_lines": 1, "orders": 1, "units": 1,
        "revenue_usd": "0.10", "cost_usd": "0.20", "gross_profit_usd": "-0.10",
    }
    assert ControlTuple.from_mapping(c.to_json()) == c


def test_total_adds_partitions_and_differences_name_fields():
    days = [ControlTuple(1, 1, 1, 80, 50, 30), ControlTuple(3, 2, 4, 185, 130, 55)]
    assert total(days) == ControlTuple(4, 3, 5, 265, 180, 85)
    diff = ControlTuple(3, 2, 4, 185, 140, 45).differences(ControlTuple(3, 2, 4, 185, 130, 55))
    assert set(diff) == {"cost_usd", "gross_profit_usd"}
    assert diff["cost_usd"] == {"observed": "140.00", "expected": "130.00"}


def test_fact_controls_sql_counts_distinct_orders():
    con = duckdb_connection()
    d = pa.array([Decimal("10.00"), Decimal("5.00"), Decimal("1.00")], pa.decimal128(18, 2))
    con.register("f", pa.table({
        "sales_date": pa.array([19620, 19620, 19620], pa.date32()),
        "order_id": ["A", "A", "B"], "quantity": [1, 2, 3],
        "revenue_usd": d, "cost_usd": d, "gross_profit_usd": pa.array([Decimal("0")] * 3, pa.decimal128(18, 2)),
    }))
    (day, controls), = controls_by_date(con, FACT_CONTROLS_SQL, "f").items()
    assert controls == ControlTuple(3, 2, 6, 16, 16, 0)


@pytest.mark.parametrize("value", [None, 0, "0"])
def test_missing_money_is_zero(value):
    assert ControlTuple(revenue_usd=value).revenue_usd == Decimal("0.00")
