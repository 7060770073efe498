"""Control tuples of every layer, read from published tables at pinned snapshots.

Checks, the certification gate, ``atlasmart verify`` and the drills all use
these functions, so "the controls reconcile" means the same thing everywhere.
Each function returns ``{partition: value}`` for the partitions asked, with a
zero tuple for a partition that has no rows (callers decide whether "no rows"
is acceptable).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Callable, Sequence

import duckdb

from ..domain.controls import AGG_CONTROLS_SQL, FACT_CONTROL_COLUMNS, FACT_CONTROLS_SQL, ControlTuple, controls_by_date
from ..store.tables import CONTROL_TUPLE, FACT_SALES, METRIC_GROSS_REVENUE, TableSpec
from ..store.warehouse import Warehouse, duckdb_connection
from .fingerprints import fingerprint_relation, fingerprints_by_partition



def _fill(partitions: Sequence[str], found: dict) -> dict:
    return {p: found.get(p, ControlTuple()) for p in partitions}


def _by_chunks(
    warehouse: Warehouse, spec: TableSpec, partitions: Sequence[str], snapshot_id: int | None,
    read: Callable[[list[str]], dict],
) -> dict:
    """``read`` of the partitions a chunk of days at a time (``Warehouse.read_chunks``), merged.

    Every function here groups by day; over a whole range in one query its
    memory grows with the range, chunk by chunk it stays flat.
    """
    found: dict = {}
    for chunk in warehouse.read_chunks(spec, partitions, snapshot_id):
        found.update(read(chunk))
    return found


def controls_of(
    warehouse: Warehouse,
    spec: TableSpec,
    partitions: Sequence[str],
    snapshot_id: int | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> dict[str, ControlTuple]:
    """Control tuple per partition of a fact-shaped or aggregate-shaped table."""
    if spec == FACT_SALES:
        sql = FACT_CONTROLS_SQL
    elif spec.controls == CONTROL_TUPLE:  # aggregate-shaped: one row per day with the six control columns
        sql = AGG_CONTROLS_SQL
    else:
        raise ValueError(f"{spec.name} carries no control tuple")
    own = con is None
    con = con or duckdb_connection()

    def read(days: list[str]) -> dict[str, ControlTuple]:
        return controls_by_date(con, sql, warehouse.register(con, spec, days, snapshot_id, name=f"ctl_{spec.name}"))

    try:
        return _fill(partitions, _by_chunks(warehouse, spec, partitions, snapshot_id, read))
    finally:
        if own:
            con.close()


def metric_revenue_of(
    warehouse: Warehouse,
    partitions: Sequence[str],
    snapshot_id: int | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> dict[str, Decimal]:
    """Governed revenue per partition (the metric summed over its channels)."""
    own = con is None
    con = con or duckdb_connection()

    def read(days: list[str]) -> dict[str, Decimal]:
        view = warehouse.register(con, METRIC_GROSS_REVENUE, days, snapshot_id, name="ctl_metric")
        return dict(con.sql(f"SELECT sales_date::VARCHAR, sum(value_usd)::DECIMAL(18,2) FROM {view} GROUP BY 1").fetchall())

    try:
        found = _by_chunks(warehouse, METRIC_GROSS_REVENUE, partitions, snapshot_id, read)
        return {p: Decimal(found.get(p, 0)).quantize(Decimal("0.01")) for p in partitions}
    finally:
        if own:
            con.close()


def fact_controls_and_drift_of(
    warehouse: Warehouse,
    partitions: Sequence[str],
    snapshot_id: int | None = None,
) -> dict[str, tuple[ControlTuple, int]]:
    """``controls_of(FACT_SALES)`` of each partition, and its event-day drift, from one scan of the fact.

    The drift is the paid lines whose event time falls on another UTC day than
    their business day (the anomaly guard's measure). The certification gate
    needs both for every day it judges; at a year of 100k-row days the fact is
    the one large table it reads, so it is read once.
    """
    con = duckdb_connection()

    def read(days: list[str]) -> dict[str, tuple[ControlTuple, int]]:
        view = warehouse.register(con, FACT_SALES, days, snapshot_id, name="ctl_fact_drift")
        rows = con.sql(
            f"SELECT sales_date,{FACT_CONTROL_COLUMNS},\n"
            f"       count(*) FILTER (WHERE CAST(timezone('UTC', event_ts) AS DATE) <> sales_date) AS drift_lines\n"
            f"FROM {view} GROUP BY sales_date"
        ).fetchall()
        return {row[0].isoformat(): (ControlTuple.from_row(row[1:-1]), int(row[-1])) for row in rows}

    try:
        found = _by_chunks(warehouse, FACT_SALES, partitions, snapshot_id, read)
        return {p: found.get(p, (ControlTuple(), 0)) for p in partitions}
    finally:
        con.close()


def fingerprints_of(
    warehouse: Warehouse,
    spec: TableSpec,
    partitions: Sequence[str],
    snapshot_id: int | None = None,
) -> dict[str, str]:
    """Canonical SHA-256 of each partition's rows at a snapshot (read a chunk of days at a time)."""
    con = duckdb_connection()

    def read(days: list[str]) -> dict[str, str]:
        view = warehouse.register(con, spec, days, snapshot_id, name="fp_rows")
        return fingerprints_by_partition(con, view, spec.partition_column, spec.grain)

    try:
        found = _by_chunks(warehouse, spec, partitions, snapshot_id, read)
        if all(p in found for p in partitions):
            return {p: found[p] for p in partitions}
        # A day with no row has the fingerprint of no rows (its header alone): worked out only when one is asked.
        view = warehouse.register(con, spec, partitions, snapshot_id, name="fp_rows")
        empty = fingerprint_relation(con, f"(SELECT * FROM {view} WHERE false)", spec.grain)
        return {p: found.get(p, empty) for p in partitions}
    finally:
        con.close()
