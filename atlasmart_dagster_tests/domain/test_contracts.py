import pytest

from atlasmart_dagster.domain.contracts import CANONICAL_NAMES, CONTRACT_V1, SourceContract, typed_projection_sql
from atlasmart_dagster.store.warehouse import duckdb_connection


def test_v1_conformance_names_missing_and_unexpected_fields():
    present = set(CANONICAL_NAMES) - {"line_amount_usd"} | {"gross_line_amount_usd"}
    result = CONTRACT_V1.conformance(present)
    assert not result.conforms
    assert result.missing == ("line_amount_usd",)
    assert result.unexpected == ("gross_line_amount_usd",)
    assert "missing line_amount_usd" in result.describe()


def test_a_renaming_contract_maps_source_fields_onto_canonical_ones():
    v2 = SourceContract("v2", "erp", "renamed", renames={"gross_line_amount_usd": "line_amount_usd"})
    present = set(CANONICAL_NAMES) - {"line_amount_usd"} | {"gross_line_amount_usd"}
    assert v2.conformance(present).conforms


@pytest.mark.parametrize(
    "field,value,error",
    [
        ("quantity", "two", "quantity"),
        ("line_amount_usd", "12.345", "line_amount_usd"),  # would round: refused
        ("line_amount_usd", "12.3", None),
        ("event_ts", "yesterday", "event_ts"),
        ("sales_date", "2026-13-01", "sales_date"),
        ("quantity", None, None),  # NULL is not a type error (it is a null required field)
    ],
)
def test_typed_projection_flags_values_that_fail_to_cast(field, value, error):
    con = duckdb_connection()
    row = {name: None for name in CANONICAL_NAMES}
    row.update({"quantity": "1", "line_amount_usd": "1.00", "event_ts": "2026-09-20T06:40:00Z", "sales_date": "2026-09-20"})
    row[field] = value
    cols = ", ".join(f"{('NULL' if v is None else repr(v))}::VARCHAR AS {k}" for k, v in row.items())
    con.execute(f"CREATE TEMP VIEW src AS SELECT {cols}")
    errors, invalid = con.sql(
        f"SELECT type_error_fields, invalid_values_json FROM ({typed_projection_sql(CONTRACT_V1, 'src', CANONICAL_NAMES)})"
    ).fetchall()[0]
    assert errors == error
    if error:
        assert value in invalid
    else:
        assert invalid is None


def test_typed_parquet_columns_are_taken_as_they_are_even_when_described_longhand(tmp_path):
    con = duckdb_connection()
    path = tmp_path / "typed.parquet"
    con.execute(f"COPY (SELECT TIMESTAMPTZ '2026-09-20 06:40:00+00' AS event_ts, 2::INTEGER AS quantity) TO '{path}'")
    from atlasmart_dagster.store.landing import field_types

    types = field_types(con, path, "parquet")
    assert types["event_ts"].upper() in ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ")
    sql = typed_projection_sql(CONTRACT_V1, f"read_parquet('{path}')", ["event_ts", "quantity"], source_types=types)
    assert "TRY_CAST(\"event_ts\"" not in sql and "TRY_CAST(\"quantity\"" not in sql
    assert con.sql(f"SELECT quantity, type_error_fields FROM ({sql})").fetchall() == [(2, None)]
