"""Generate a landing zone of N days x M rows with known answers.

Each day is one Parquet batch with a truthful manifest. Its rows are, by design:

* clean paid lines: line j of the day (``order = j // 3``, ``line_no = j % 3 + 1``),
  quantity ``1 + j % 4``, amount ``10.00 + ((37 j) mod 9000) / 100`` USD, cost
  60 % of the amount rounded down to the cent, channel/customer/product cycling;
* 1 % superseded versions: an *earlier* version (lower source_seq, amount
  +1.00) of a clean line, which the newer clean row replaces;
* 1 % exact re-sends of clean lines (later source_seq), quarantined as duplicates;
* 3 % non-paid lines (refunded / pending) on their own orders: accepted, not sold;
* 1 % bad rows on their own orders, a quarter each: quantity 0, NULL product,
  negative cost, unknown channel: quarantined.

The expected figures are computed from that design with integer arithmetic
over the periodic formulas, never by the pipeline's SQL, so every benchmarked
run can be checked at any scale.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Callable

from ..domain.controls import ControlTuple
from ..store.landing import SOURCE_SYSTEM, partition_folder_name
from ..store.raw_store import MANIFEST_NAME
from ..store.warehouse import duckdb_connection

AMOUNT_PERIOD = 9000


@dataclass(frozen=True)
class DayPlan:
    partition: str
    rows: int
    superseded: int
    duplicates: int
    non_paid: int
    bad: int

    @property
    def clean(self) -> int:
        return self.rows - self.superseded - self.duplicates - self.non_paid - self.bad

    @property
    def accepted(self) -> int:
        return self.clean + self.superseded + self.non_paid

    @property
    def quarantined(self) -> int:
        return self.duplicates + self.bad


def plan_day(partition: str, rows: int) -> DayPlan:
    share = max(rows // 100, 1) if rows >= 20 else 0
    return DayPlan(partition, rows, superseded=share, duplicates=share, non_paid=3 * share, bad=share)


def _amount_cents(j: int) -> int:
    return 1000 + (37 * j) % AMOUNT_PERIOD


def _cost_cents(j: int) -> int:
    return _amount_cents(j) * 60 // 100


def expected_controls(plan: DayPlan) -> ControlTuple:
    """The day's control tuple from the design alone (closed form over the periods)."""
    c = plan.clean
    full, rest = divmod(c, AMOUNT_PERIOD)
    revenue = full * sum(_amount_cents(j) for j in range(AMOUNT_PERIOD)) + sum(_amount_cents(j) for j in range(rest))
    cost = full * sum(_cost_cents(j) for j in range(AMOUNT_PERIOD)) + sum(_cost_cents(j) for j in range(rest))
    units = (c // 4) * (1 + 2 + 3 + 4) + sum(1 + j for j in range(c % 4))
    orders = (c + 2) // 3
    cents = lambda v: f"{v // 100}.{v % 100:02d}"  # noqa: E731
    return ControlTuple(c, orders, units, cents(revenue), cents(cost), cents(revenue - cost))


def _day_sql(plan: DayPlan, seq_base: int) -> str:
    d = plan.partition
    c, s, dup, p, b = plan.clean, plan.superseded, plan.duplicates, plan.non_paid, plan.bad
    tag = d.replace("-", "")
    # source_seq: superseded versions first, then clean lines, then re-sends, non-paid, bad rows.
    clean_cols = (
        "'O' || '{tag}' || lpad(CAST(j // 3 AS VARCHAR), 8, '0') AS order_id, CAST(j % 3 + 1 AS INTEGER) AS line_no, "
        "DATE '{d}' AS sales_date, TIMESTAMPTZ '{d} 00:00:00+00' + to_seconds(j % 86400) AS event_ts, "
        "'C' || (j % 5000) AS customer_id, 'P' || (j % 200) AS product_id, "
        "['web', 'store', 'marketplace'][j % 3 + 1] AS channel, CAST(1 + j % 4 AS INTEGER) AS quantity"
    ).format(tag=tag, d=d)
    amount = f"CAST((1000 + (37 * j) % {AMOUNT_PERIOD}) AS DECIMAL(18,2)) / 100"
    cost = f"CAST(((1000 + (37 * j) % {AMOUNT_PERIOD}) * 60 // 100) AS DECIMAL(18,2)) / 100"
    other = (
        "'X' || '{tag}' || lpad(CAST(k AS VARCHAR), 8, '0') AS order_id, CAST(1 AS INTEGER) AS line_no, "
        "DATE '{d}' AS sales_date, TIMESTAMPTZ '{d} 12:00:00+00' AS event_ts, 'C' || (k % 5000) AS customer_id"
    ).format(tag=tag, d=d)
    return f"""
    SELECT CAST({seq_base} + j AS BIGINT) AS source_seq, {clean_cols},
           CAST({amount} + 1 AS DECIMAL(18,2)) AS line_amount_usd, CAST({cost} AS DECIMAL(18,2)) AS line_cost_usd,
           'paid' AS status
    FROM range({s}) t(j)
    UNION ALL
    SELECT CAST({seq_base + s} + j AS BIGINT), {clean_cols},
           CAST({amount} AS DECIMAL(18,2)), CAST({cost} AS DECIMAL(18,2)), 'paid'
    FROM range({c}) t(j)
    UNION ALL
    SELECT CAST({seq_base + s + c} + i AS BIGINT), {clean_cols},
           CAST({amount} AS DECIMAL(18,2)), CAST({cost} AS DECIMAL(18,2)), 'paid'
    FROM (SELECT i, i * {max(c // max(dup, 1), 1)} AS j FROM range({dup}) t(i))
    UNION ALL
    SELECT CAST({seq_base + s + c + dup} + k AS BIGINT), {other}, 'P1', 'web', CAST(1 AS INTEGER),
           CAST(20.00 AS DECIMAL(18,2)), CAST(12.00 AS DECIMAL(18,2)), CASE WHEN k % 2 = 0 THEN 'refunded' ELSE 'pending' END
    FROM range({p}) t(k)
    UNION ALL
    SELECT CAST({seq_base + s + c + dup + p} + k AS BIGINT), {other.replace("'X'", "'Z'")},
           CASE WHEN k % 4 = 1 THEN NULL ELSE 'P1' END,
           CASE WHEN k % 4 = 3 THEN 'fax' ELSE 'web' END,
           CAST(CASE WHEN k % 4 = 0 THEN 0 ELSE 1 END AS INTEGER),
           CAST(20.00 AS DECIMAL(18,2)),
           CAST(CASE WHEN k % 4 = 2 THEN -1.00 ELSE 12.00 END AS DECIMAL(18,2)), 'paid'
    FROM range({b}) t(k)
    """


def generate(
    out: Path,
    days: int,
    rows_per_day: int,
    start: str = "2026-09-17",
    progress: Callable[[int, int, int], None] | None = None,
) -> dict:
    """Write ``days`` batches under ``out/landing`` and the expected figures to ``out/expected.json``."""
    out = Path(out)
    landing = out / "landing"
    con = duckdb_connection()
    expected = {"rows_per_day": rows_per_day, "days": {}}
    seq = 1
    first = date.fromisoformat(start)
    for n in range(days):
        partition = (first + timedelta(days=n)).isoformat()
        plan = plan_day(partition, rows_per_day)
        folder = landing / partition_folder_name(partition)
        folder.mkdir(parents=True, exist_ok=True)
        data = folder / "order_lines.parquet"
        con.execute(f"COPY ({_day_sql(plan, seq)}) TO '{data}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 131072)")
        manifest = {
            "source_system": SOURCE_SYSTEM,
            "partition": partition,
            "batch_id": f"GEN-{partition.replace('-', '')}-01",
            "schema_version": "v1",
            "expected_rows": plan.rows,
            "source_seq_low": seq,
            "source_seq_high": seq + plan.rows - 1,
            "ready_at": f"{(first + timedelta(days=n + 1)).isoformat()}T08:04:00Z",
            "data_file": data.name,
            "data_sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        }
        (folder / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2))
        expected["days"][partition] = {
            **asdict(plan),
            "accepted": plan.accepted,
            "quarantined_total": plan.quarantined,
            "controls": expected_controls(plan).to_json(),
        }
        seq += plan.rows
        if progress:
            progress(n + 1, days, (n + 1) * rows_per_day)
    con.close()
    (out / "expected.json").write_text(json.dumps(expected, indent=2))
    return expected
