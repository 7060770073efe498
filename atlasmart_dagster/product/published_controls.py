"""Control tuples of every layer, read from published tables at pinned snapshots.

Checks, the certification gate, ``atlasmart verify`` and the drills all use
these functions, so "the controls reconcile" means the same thing everywhere.
Each function returns ``{partition: value}`` for the partitions asked, with a
zero tuple for a partition that has no rows (callers decide whether "no rows"
is acceptable).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Sequence

import duckdb

from ..domain.controls import AGG_CONTROLS_SQL, FACT_CONTROL_COLUMNS, FACT_CONTROLS_SQL, ControlTuple, controls_by_date
from ..store.tables import CONTROL_TUPLE, FACT_SALES, METRIC_GROSS_REVENUE, TableSpec
from ..store.warehouse import Warehouse, duckdb_connection
from .fingerprints import fingerprint_relation, fingerprints_by_partition



def _fill(partitions: Sequence[str], found: dict) -> dict:
    return {p: found.get(p, ControlTuple()) for p in partitions}


def controls_of(
    warehouse: Warehouse,
    spec: TableSpec,
    partitions: Sequence[str],
    snapshot_id: int | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> dict[str, ControlTuple]:
    """Control tuple per partition of a fact-shaped or aggregate-shaped table."""
    own = con is None
    con = con or duckdb_connection()
    try:
        view = warehouse.register(con, spec, partitions, snapshot_id, name=f"ctl_{spec.name}")
        if spec == FACT_SALES:
            found = controls_by_date(con, FACT_CONTROLS_SQL, view)
        elif spec.controls == CONTROL_TUPLE:  # aggregate-shaped: one row per day with the six control columns
            found = controls_by_date(con, AGG_CONTROLS_SQL, view)
        else:
            raise ValueError(f"{spec.name} carries no control tuple")
        return _fill(partitions, found)
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
    try:
        view = warehouse.register(con, METRIC_GROSS_REVENUE, partitions, snapshot_id, name="ctl_metric")
        rows = con.sql(
            f"SELECT sales_date::VARCHAR, sum(value_usd)::DECIMAL(18,2) FROM {view} GROUP BY 1"
        ).fetchall()
        found = dict(rows)
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
    try:
        view = warehouse.register(con, FACT_SALES, partitions, snapshot_id, name="ctl_fact_drift")
        rows = con.sql(
            f"SELECT sales_date,{FACT_CONTROL_COLUMNS},\n"
            f"       count(*) FILTER (WHERE CAST(timezone('UTC', event_ts) AS DATE) <> sales_date) AS drift_lines\n"
            f"FROM {view} GROUP BY sales_date"
        ).fetchall()
        found = {row[0].isoformat(): (ControlTuple.from_row(row[1:-1]), int(row[-1])) for row in rows}
        return {p: found.get(p, (ControlTuple(), 0)) for p in partitions}
    finally:
        con.close()


def fingerprints_of(
    warehouse: Warehouse,
    spec: TableSpec,
    partitions: Sequence[str],
    snapshot_id: int | None = None,
) -> dict[str, str]:
    """Canonical SHA-256 of each partition's rows at a snapshot (one read for all partitions)."""
    con = duckdb_connection()
    try:
        view = warehouse.register(con, spec, partitions, snapshot_id, name="fp_rows")
        found = fingerprints_by_partition(con, view, spec.partition_column, spec.grain)
        if all(p in found for p in partitions):
            return {p: found[p] for p in partitions}
        # A day with no row has the fingerprint of no rows (its header alone): worked out only when one is asked.
        empty = fingerprint_relation(con, f"(SELECT * FROM {view} WHERE false)", spec.grain)
        return {p: found.get(p, empty) for p in partitions}
    finally:
        con.close()
