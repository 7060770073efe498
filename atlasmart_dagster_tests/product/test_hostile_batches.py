"""Hostile and careless input: refused at the door or quarantined with a reason, never certified wrong.

Each case runs the real chain on the sample home with one day's batch
replaced, and checks what consumers are served.
"""

import io
import json

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from atlasmart_dagster.domain.controls import ControlTuple
from atlasmart_dagster.errors import SourceNotReady
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.published_controls import controls_of
from atlasmart_dagster.product.readiness import prepare_partition
from atlasmart_dagster.store.tables import FACT_SALES, QUARANTINE_ORDER_LINES
from atlasmart_dagster.store.warehouse import duckdb_connection
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAY = "2026-09-20"  # three paid lines: (3, 2, 4, 185, 130, 55)


def run(env, day=DAY):
    return run_chain(env.defs, env.instance, env.platform, [day], lane="backfill")


def served(env, day=DAY):
    version = env.ledger.partitions.served("mart_finance_daily_sales", day)
    return version.certification.controls if version else None


def quarantined(env, day=DAY) -> dict[int, str]:
    table = env.warehouse.read(QUARANTINE_ORDER_LINES, [day])
    return dict(zip(table.column("source_row").to_pylist(), table.column("reason").to_pylist()))


def write_lines(env, lines: list[str], day=DAY, **manifest):
    data = "".join(line + "\n" for line in lines).encode()
    rows = [r for r in map(json.loads, lines) if isinstance(r, dict)]
    return write_batch(env.day_dir(day), rows, data=data, **{"expected_rows": len(lines), **manifest})


def refusal(env, day=DAY) -> str:
    with pytest.raises(SourceNotReady) as info:
        prepare_partition(env.platform, day, env.platform.clock.now(), duckdb_connection())
    assert not list((env.home / "raw").rglob(f"sales_date={day}/batch_id=*"))  # nothing admitted
    return str(info.value)


# -- poison batches: what the load could not read is refused before the raw store ------------------

def test_a_duplicate_json_key_is_refused_and_a_corrected_resend_recovers_the_day(env):
    rows = read_rows(env.day_dir(DAY))
    lines = [json.dumps(r) for r in rows]
    lines[1] = lines[1][:-1] + ', "quantity": 7}'  # quantity twice: which one counts?
    write_lines(env, lines, batch_id="ERP-20260920-01")
    assert "line 2 repeats the key quantity" in refusal(env)
    assert not run(env).success
    write_batch(env.day_dir(DAY), rows, batch_id="ERP-20260920-02")  # the ERP re-sends it clean
    assert run(env).certified == [DAY] and served(env) == ControlTuple(3, 2, 4, 185, 130, 55)


def test_a_line_that_is_not_an_object_is_refused(env):
    rows = read_rows(env.day_dir(DAY))
    write_lines(env, [json.dumps(rows[0]), "[1, 2]", json.dumps(rows[2])])
    assert "line 2 is a JSON array, not an object" in refusal(env)


def test_a_manifest_with_a_byte_order_mark_loads_and_replays(env):
    manifest = env.day_dir(DAY) / "_manifest.json"
    manifest.write_bytes(b"\xef\xbb\xbf" + manifest.read_bytes())
    assert run(env).certified == [DAY]
    manifest.unlink()  # the landing zone is cleaned: the day replays from the raw store
    assert run(env).success and served(env) == ControlTuple(3, 2, 4, 185, 130, 55)


def test_a_data_file_with_a_byte_order_mark_is_refused_at_the_door(env):
    data = (env.day_dir(DAY) / "order_lines.jsonl").read_bytes()
    write_batch(env.day_dir(DAY), read_rows(env.day_dir(DAY)), data=b"\xef\xbb\xbf" + data)
    assert "byte order mark" in refusal(env)


def test_a_ragged_csv_row_is_refused_with_its_line(env):
    rows = read_rows(env.day_dir(DAY))
    header = ",".join(rows[0])
    body = [",".join(str(v) for v in r.values()) for r in rows]
    body[1] = ",".join(body[1].split(",")[:5])  # a row cut short
    data = ("\n".join([header, *body]) + "\n").encode()
    (env.day_dir(DAY) / "order_lines.jsonl").unlink()
    write_batch(env.day_dir(DAY), rows, data=data, name="order_lines.csv")
    assert "Line: 3" in refusal(env)


# -- strict types: no rounding, no parsing, no guessing ------------------------------------------

@pytest.mark.parametrize(
    "field,value",
    [
        ("quantity", 2.7), ("quantity", "2.7"), ("quantity", 2.0), ("quantity", "0x10"), ("quantity", "1_000"),
        ("quantity", 1e3), ("quantity", True), ("line_no", 1.5), ("quantity", 99999999999),
        ("line_amount_usd", "$40.00"), ("line_amount_usd", "4e1"), ("line_amount_usd", "40.001"),
        ("order_id", 1004), ("order_id", {"id": "O1004"}), ("customer_id", ["C004"]),
        ("sales_date", "20260920"), ("source_seq", "206.0"),
    ],
)
def test_a_value_not_written_in_its_contract_type_is_quarantined_not_coerced(env, field, value):
    rows = read_rows(env.day_dir(DAY))
    rows[0][field] = value
    write_batch(env.day_dir(DAY), rows)
    run(env)
    assert quarantined(env)[1] == "type_error"


def test_an_empty_key_is_a_missing_value(env):
    rows = read_rows(env.day_dir(DAY))
    rows[0]["order_id"] = "  "
    write_batch(env.day_dir(DAY), rows)
    run(env)
    assert quarantined(env)[1] == "null_required_field"


@pytest.mark.parametrize("status", ["PAID", "paid ", "payed", ""])
def test_a_status_outside_the_closed_set_is_quarantined(env, status):
    rows = read_rows(env.day_dir(DAY))
    rows[0]["status"] = status
    write_batch(env.day_dir(DAY), rows)
    run(env)
    assert quarantined(env)[1] == ("null_required_field" if not status else "unknown_status")


def test_an_amount_that_would_overflow_the_day_is_quarantined_and_the_load_succeeds(env):
    rows = read_rows(env.day_dir(DAY))
    for row in rows[:2]:
        row["line_amount_usd"] = "9999999999999999.99"
    write_batch(env.day_dir(DAY), rows)
    outcome = run(env)
    assert outcome.failures == [] or all("unclassified" not in f for f in outcome.failures)
    assert set(quarantined(env).values()) == {"out_of_range"}


def test_parquet_column_types_are_part_of_the_contract(env):
    rows = read_rows(env.day_dir(DAY))
    con = duckdb.connect()
    con.register("t", pa.Table.from_pylist(rows))
    typed = con.sql(
        "SELECT source_seq::BIGINT source_seq, order_id, line_no::INTEGER line_no, sales_date::DATE sales_date, "
        "event_ts::TIMESTAMPTZ event_ts, customer_id, product_id, channel, quantity::DOUBLE + 0.7 AS quantity, "
        "line_amount_usd::DECIMAL(18,2) line_amount_usd, line_cost_usd::DECIMAL(18,2) line_cost_usd, status FROM t"
    ).to_arrow_table()
    sink = io.BytesIO()
    pq.write_table(typed, sink)
    (env.day_dir(DAY) / "order_lines.jsonl").unlink()
    write_batch(env.day_dir(DAY), rows, data=sink.getvalue(), name="order_lines.parquet")
    run(env)
    assert set(quarantined(env).values()) == {"type_error"}  # a double is never rounded into a quantity
    assert served(env) is None


# -- thresholds: a day that is mostly refused is not certified (never served as zeros) ----------

def test_a_whole_column_type_change_is_not_certified_as_a_day_of_zeros(env):
    rows = read_rows(env.day_dir(DAY))
    for row in rows:
        row["line_amount_usd"] = "$" + row["line_amount_usd"]
    write_batch(env.day_dir(DAY), rows)
    outcome = run(env)
    assert not outcome.success and outcome.certified == []
    assert served(env) is None  # absent, not (0, 0, 0, 0, 0, 0)
    (check,) = [c for c in env.ledger.checks.results(partition=DAY) if c["check_name"] == "quality_within_contract_thresholds"]
    assert not check["passed"] and "type_error in 3 of 3 rows" in " ".join(check["observed"]["breaches"])
    assert controls_of(env.warehouse, FACT_SALES, [DAY])[DAY] == ControlTuple()  # nothing built past staging


# -- a day with no sales: zeros are the truth ------------------------------------------------------

@pytest.mark.parametrize("name", ["order_lines.jsonl", "order_lines.csv", "order_lines.parquet"])
def test_a_no_sales_day_certifies_with_zeros_from_every_format(env, name):
    rows = read_rows(env.day_dir(DAY))
    if name.endswith(".jsonl"):
        data = b""
    elif name.endswith(".csv"):
        data = (",".join(rows[0]) + "\n").encode()
    else:
        con = duckdb.connect()
        con.register("t", pa.Table.from_pylist(rows))
        sink = io.BytesIO()
        pq.write_table(con.sql("SELECT * FROM t LIMIT 0").to_arrow_table(), sink)
        data = sink.getvalue()
    (env.day_dir(DAY) / "order_lines.jsonl").unlink()
    write_batch(env.day_dir(DAY), [], data=data, name=name, source_seq_low=0, source_seq_high=0)
    assert run(env).certified == [DAY]
    assert served(env) == ControlTuple()


# -- a refusal says which check and which fields ---------------------------------------------------

@pytest.mark.parametrize("change,expected", [
    (lambda r: {**r, "coupon": "X"}, "unexpected coupon"),
    (lambda r: {k: v for k, v in r.items() if k != "status"}, "missing status"),
])
def test_a_contract_refusal_names_the_check_and_the_fields(env, change, expected):
    rows = [change(r) for r in read_rows(env.day_dir(DAY))]
    write_batch(env.day_dir(DAY), rows)
    failures = " | ".join(run(env).failures)
    assert "raw_order_lines:source_contract_conforms failed for 2026-09-20" in failures and expected in failures


def test_a_threshold_refusal_names_the_breach(env):
    rows = read_rows(env.day_dir(DAY))
    for row in rows:
        row["status"] = "PAID"
    write_batch(env.day_dir(DAY), rows)
    failures = " | ".join(run(env).failures)
    assert "stg_order_lines:quality_within_contract_thresholds failed" in failures
    assert "unknown_status in 3 of 3 rows" in failures


def test_a_day_of_type_errors_opens_an_incident_triaged_as_a_schema_change(env):
    from atlasmart_dagster.ops.response.incidents.detection import detect
    from atlasmart_dagster.store.ledger.incidents import IncidentStore
    from atlasmart_dagster.ops.response.incidents.triage import classify

    rows = read_rows(env.day_dir(DAY))
    for row in rows:
        row["line_amount_usd"] = "$" + row["line_amount_usd"]
    write_batch(env.day_dir(DAY), rows)
    run(env)
    (incident_id,) = detect(env.platform)
    triage = classify(env.platform, IncidentStore(env.ledger).get(incident_id))
    assert triage["verdict"] == "pipeline or schema bug"
    assert any("schema change" in e for e in triage["evidence"]["pipeline or schema bug"])
