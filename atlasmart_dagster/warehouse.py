"""The warehouse: Iceberg tables (pyiceberg, SQL catalog) read and written with DuckDB.

Writes go through pyiceberg so every partition replacement is one atomic
Iceberg commit (``overwrite`` with a filter on the partition column), and every
commit is a snapshot that certification can pin. Reads of more than a handful
of rows let pyiceberg *plan* the files and DuckDB *read* them, which is an
order of magnitude faster than ``scan().to_arrow()`` for large partitions.
That shortcut is valid only while tables have no delete files; pyiceberg's
copy-on-write overwrite never writes any, and ``data_files`` refuses to
continue if one ever appears.

Concurrent commits (the current and backfill lanes writing different days of
the same table) race on the catalog row: the loser gets
``CommitFailedException``. It is transient: reload the table and redo the
overwrite, which is idempotent because it replaces whole partitions.
"""

from __future__ import annotations

import fcntl
import os
import random
import threading
import time
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from contextlib import contextmanager
from functools import cached_property
from typing import Iterable, Iterator, Sequence

import duckdb
import pyarrow as pa
import pyarrow.compute as pc  # noqa: F401 - partitions_in
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError, ValidationException
from pyiceberg.expressions import AlwaysTrue, And, EqualTo, GreaterThanOrEqual, In, LessThanOrEqual
from pyiceberg.table import Table

from .errors import TransientError, is_transient
from .home import AtlasmartHome
from .tables import NAMESPACE, TableSpec

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
# Snappy: fastest to write and read here; row groups sized for DuckDB's parallel scans.
_PARQUET = "(FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 122880)"
_WRITERS = max(2, min(4, os.cpu_count() or 2))
COMMIT_ATTEMPTS = 8
SNAPSHOT_PROPERTY_PREFIX = "atlasmart."
TABLE_PROPERTIES = {
    # pyiceberg re-bases a lost commit on the new head and reuses the files it
    # wrote; more attempts than the default 4 keep two lanes from starving.
    "commit.retry.num-retries": "10",
    # Every commit writes a new metadata.json; keep a bounded history of them.
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
}


@contextmanager
def _home_lock(home: AtlasmartHome, name: str) -> Iterator[None]:
    """An exclusive, process-wide lock for one-time setup in a home (blocking)."""
    home.locks_dir.mkdir(parents=True, exist_ok=True)
    handle = os.open(home.locks_dir / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def _partition_filter(spec: TableSpec, partitions: Sequence[str] | None):
    if spec.partition_column is None or partitions is None:
        return AlwaysTrue()
    if len(partitions) == 1:
        return EqualTo(spec.partition_column, partitions[0])
    days = sorted(partitions)
    first, last = date.fromisoformat(days[0]), date.fromisoformat(days[-1])
    if (last - first).days + 1 == len(set(days)):
        # A contiguous range: two bounds instead of a set pyiceberg re-evaluates
        # for every manifest entry (quadratic for a year of days).
        return And(GreaterThanOrEqual(spec.partition_column, days[0]), LessThanOrEqual(spec.partition_column, days[-1]))
    return In(spec.partition_column, days)


def _local_path(uri: str) -> str:
    return uri.removeprefix("file://")


_ENGINE: duckdb.DuckDBPyConnection | None = None
_ENGINE_LOCK = threading.Lock()


def duckdb_connection() -> duckdb.DuckDBPyConnection:
    """A connection to the process's in-memory DuckDB engine, with UTC session time.

    Opening a DuckDB database costs ~30 ms; a cursor on a shared one ~1 ms.
    Everything our code creates on it is connection-local (temp views, temp
    tables, registered Arrow tables), so concurrent users do not collide.
    """
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            _ENGINE = duckdb.connect(":memory:")
        con = _ENGINE.cursor()
    con.execute("SET TimeZone = 'UTC'")
    return con


class Warehouse:
    """Iceberg tables of one AtlasMart home."""

    def __init__(self, home: AtlasmartHome):
        self.home = home.ensure()

    @cached_property
    def catalog(self) -> SqlCatalog:
        # Two runs starting on a fresh home would both create the catalog's
        # tables ("table iceberg_tables already exists"): initialise under a lock.
        with _home_lock(self.home, "catalog"):
            catalog = SqlCatalog(
                NAMESPACE,
                # timeout: wait for the SQLite write lock instead of failing at once.
                uri=f"sqlite:///{self.home.catalog_db}?timeout=60",
                warehouse=f"file://{self.home.warehouse_dir}",
            )
            catalog.create_namespace_if_not_exists(NAMESPACE)
        return catalog

    # -- tables -----------------------------------------------------------
    def table(self, spec: TableSpec) -> Table:
        """Load the table (fresh metadata), creating it on first use."""
        try:
            return self.catalog.load_table(spec.identifier)
        except NoSuchTableError:
            with _home_lock(self.home, "catalog"):
                return self.catalog.create_table_if_not_exists(
                    spec.identifier,
                    schema=spec.iceberg_schema(),
                    partition_spec=spec.partition_spec(),
                    properties=TABLE_PROPERTIES,
                )

    def exists(self, spec: TableSpec) -> bool:
        return self.catalog.table_exists(spec.identifier)

    def existing(self, spec: TableSpec) -> Table | None:
        """The table with fresh metadata, or None if it was never written."""
        try:
            return self.catalog.load_table(spec.identifier)
        except NoSuchTableError:
            return None

    def current_snapshot_id(self, spec: TableSpec) -> int | None:
        table = self.existing(spec)
        snapshot = table.current_snapshot() if table else None
        return snapshot.snapshot_id if snapshot else None

    # -- writes -----------------------------------------------------------
    def overwrite(
        self,
        spec: TableSpec,
        data: pa.Table,
        partitions: Sequence[str] | None,
        properties: dict[str, str] | None = None,
    ) -> int | None:
        """Atomically replace ``partitions`` (all rows if unpartitioned) with an Arrow table."""
        con = duckdb_connection()
        try:
            con.register("__overwrite_input", data)
            return self.overwrite_sql(spec, con, "SELECT * FROM __overwrite_input", partitions, properties)
        finally:
            con.close()

    def overwrite_sql(
        self,
        spec: TableSpec,
        con: duckdb.DuckDBPyConnection,
        select_sql: str,
        partitions: Sequence[str] | None,
        properties: dict[str, str] | None = None,
    ) -> int | None:
        """Atomically replace ``partitions`` (all rows if unpartitioned) with the rows of ``select_sql``.

        DuckDB writes the rows straight to Parquet, one file per partition in
        the table's canonical order (deterministic bytes), into a folder no
        other write uses; one Iceberg transaction then deletes the partitions
        and adds the files. Returns the id of the snapshot holding the new
        state. Refuses rows outside the named partitions, so a bug can never
        write into a day it was not asked to replace.
        """
        if spec.partition_column is not None and not partitions:
            raise ValueError(f"overwrite of {spec.name} needs the partitions it replaces")
        files = self._write_files(spec, con, select_sql, partitions)
        props = {SNAPSHOT_PROPERTY_PREFIX + k: str(v) for k, v in (properties or {}).items()}
        if partitions is not None:
            props[SNAPSHOT_PROPERTY_PREFIX + "partitions"] = ",".join(partitions)
        last_error: BaseException | None = None
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                table = self.table(spec)
                with warnings.catch_warnings():
                    # Replacing a partition that does not exist yet is normal here.
                    warnings.filterwarnings("ignore", message="Delete operation did not match any records")
                    with table.transaction() as transaction:
                        transaction.delete(_partition_filter(spec, partitions), snapshot_properties=props)
                        if files:
                            transaction.add_files(files, snapshot_properties=props, check_duplicate_files=False)
                        pause_before_commit(self.home, spec.name)
                # No files and nothing to delete commits nothing: the state is
                # unchanged (None for a table that never held a row).
                current = table.current_snapshot()
                return current.snapshot_id if current else None
            except Exception as exc:  # noqa: BLE001 - classified below
                # ValidationException: another writer replaced the same partition
                # between our read and our commit. Replacing it again from our
                # inputs is what a sequential run would have done (last writer wins).
                if not (is_transient(exc) or isinstance(exc, ValidationException)):
                    raise
                last_error = exc
                # Exponential backoff with full jitter: concurrent writers spread out.
                time.sleep(random.uniform(0, min(2.0, 0.05 * 2**attempt)))
        raise TransientError(
            f"commit to {spec.name} for {','.join(partitions or ['all'])} kept conflicting "
            f"after {COMMIT_ATTEMPTS} attempts: {last_error}"
        ) from last_error

    def _write_files(
        self, spec: TableSpec, con: duckdb.DuckDBPyConnection, select_sql: str, partitions: Sequence[str] | None
    ) -> list[str]:
        """Parquet files (URIs) holding the rows of ``select_sql``: one per partition present.

        Rows are cast to the table's types and sorted by the grain (a total
        order), so the same rows always give the same bytes.
        """
        folder = self.home.warehouse_dir / NAMESPACE / spec.name / "data" / uuid.uuid4().hex
        folder.mkdir(parents=True, exist_ok=True)
        casts = ", ".join(f'CAST("{c.name}" AS {c.sql_type}) AS "{c.name}"' for c in spec.columns)
        column = spec.partition_column
        grain = ", ".join(spec.grain)
        if column is None or len(partitions) == 1:
            # One file: write straight from the query, then prove no row strayed.
            target = folder / ("data.parquet" if column is None else f"{column}={partitions[0]}.parquet")
            con.execute(f"COPY (SELECT {casts} FROM ({select_sql}) ORDER BY {grain}) TO '{target}' {_PARQUET}")
            if column is not None:
                stray, rows = con.sql(
                    f"SELECT count(*) FILTER (WHERE {column} IS DISTINCT FROM DATE '{partitions[0]}'), count(*) "
                    f"FROM read_parquet('{target}')"
                ).fetchall()[0]
                if stray:
                    target.unlink()
                    raise ValueError(f"{spec.name}: {stray} rows outside the partition {partitions[0]} being replaced")
                if rows == 0:
                    target.unlink()
                    return []
            return [f"file://{target}"]
        # Several partitions: sort once into a table both cores can read, then
        # one file per day, written two at a time (a scan of a sorted table keeps its order).
        staged = f"main.__to_write_{uuid.uuid4().hex}"
        con.execute(f"CREATE TABLE {staged} AS SELECT {casts} FROM ({select_sql}) ORDER BY {column}, {grain}")
        try:
            present = [
                (row[0].isoformat() if row[0] is not None else None)
                for row in con.sql(f"SELECT DISTINCT {column} FROM {staged} ORDER BY 1").fetchall()
            ]
            stray = [p for p in present if p is None or p not in set(partitions)]
            if stray:
                raise ValueError(f"{spec.name}: rows outside the partitions being replaced: {stray}")
            targets = {day: folder / f"{column}={day}.parquet" for day in present}

            def write(day: str) -> None:
                cursor = duckdb_connection()
                try:
                    cursor.execute(
                        f"COPY (SELECT * FROM {staged} WHERE {column} = DATE '{day}') TO '{targets[day]}' {_PARQUET}"
                    )
                finally:
                    cursor.close()

            with ThreadPoolExecutor(max_workers=_WRITERS) as pool:
                list(pool.map(write, present))
            return [f"file://{targets[day]}" for day in present]
        finally:
            con.execute(f"DROP TABLE IF EXISTS {staged}")

    # -- reads ------------------------------------------------------------
    def data_files(
        self, spec: TableSpec, partitions: Sequence[str] | None = None, snapshot_id: int | None = None
    ) -> list[str]:
        """Local paths of the data files holding ``partitions`` at ``snapshot_id``."""
        table = self.existing(spec)
        if table is None or (snapshot_id is None and table.current_snapshot() is None):
            return []
        scan = table.scan(row_filter=_partition_filter(spec, partitions), snapshot_id=snapshot_id)
        files = []
        for task in scan.plan_files():
            if task.delete_files:
                raise RuntimeError(f"{spec.name} has delete files; direct Parquet reads would be wrong")
            files.append(_local_path(task.file.file_path))
        return sorted(files)

    def partition_row_counts(
        self, spec: TableSpec, partitions: Sequence[str], snapshot_id: int | None = None
    ) -> dict[str, int]:
        """Rows per partition from Iceberg file statistics (no data is read)."""
        counts = {p: 0 for p in partitions}
        table = self.existing(spec) if spec.partition_column is not None else None
        if table is None or (snapshot_id is None and table.current_snapshot() is None):
            return counts
        for task in table.scan(row_filter=_partition_filter(spec, partitions), snapshot_id=snapshot_id).plan_files():
            # Identity partition on a date column: the value is days since the epoch.
            day = date.fromordinal(_EPOCH_ORDINAL + task.file.partition[0]).isoformat()
            if day in counts:
                counts[day] += task.file.record_count
        return counts

    def relation_sql(
        self, spec: TableSpec, partitions: Sequence[str] | None = None, snapshot_id: int | None = None
    ) -> str:
        """A DuckDB SELECT over the table's rows (optionally some partitions, at a snapshot)."""
        files = self.data_files(spec, partitions, snapshot_id)
        if not files:
            return spec.empty_select_sql()
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        columns = ", ".join(spec.column_names)
        sql = f"SELECT {columns} FROM read_parquet([{listed}], union_by_name=true)"
        if spec.partition_column is not None and partitions is not None:
            days = ", ".join(f"DATE '{date.fromisoformat(p).isoformat()}'" for p in partitions)
            sql += f" WHERE {spec.partition_column} IN ({days})"
        return sql

    def register(
        self,
        con: duckdb.DuckDBPyConnection,
        spec: TableSpec,
        partitions: Sequence[str] | None = None,
        snapshot_id: int | None = None,
        name: str | None = None,
    ) -> str:
        """Create (or replace) a DuckDB view named after the table; returns the name."""
        view = name or spec.name
        con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS {self.relation_sql(spec, partitions, snapshot_id)}")
        return view

    def read(
        self, spec: TableSpec, partitions: Sequence[str] | None = None, snapshot_id: int | None = None
    ) -> pa.Table:
        con = duckdb_connection()
        try:
            return spec.conform(con.sql(self.relation_sql(spec, partitions, snapshot_id)).to_arrow_table())
        finally:
            con.close()

    def snapshots(self, spec: TableSpec) -> list[dict]:
        table = self.existing(spec)
        if table is None:
            return []
        out = []
        for snap in table.snapshots():
            summary = snap.summary.additional_properties if snap.summary else {}
            out.append(
                {
                    "snapshot_id": snap.snapshot_id,
                    "parent_id": snap.parent_snapshot_id,
                    "timestamp_ms": snap.timestamp_ms,
                    "operation": str(snap.summary.operation.value) if snap.summary else None,
                    "properties": {k: v for k, v in summary.items() if k.startswith(SNAPSHOT_PROPERTY_PREFIX)},
                }
            )
        return out


def partitions_in(data: pa.Table, column: str) -> list[str]:
    return sorted(d.isoformat() for d in pc.unique(data.column(column)).to_pylist() if d is not None)


def iter_chunks(items: Sequence[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])



PAUSE_ENV = "ATLASMART_PAUSE_BEFORE_COMMIT"


def pause_before_commit(home: AtlasmartHome, table: str) -> None:
    """Fault injection for crash tests: hold a commit after its data files are written.

    ``ATLASMART_PAUSE_BEFORE_COMMIT=fact_sales:60`` makes the next commit to
    ``fact_sales`` write a marker file and wait 60 s before committing, so a
    test can kill the process mid-commit. Unset in production.
    """
    setting = os.environ.get(PAUSE_ENV, "")
    name, _, seconds = setting.partition(":")
    if name != table:
        return
    marker = home.locks_dir / f"paused-before-commit-{table}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(os.getpid()))
    time.sleep(float(seconds or 60))


def plan_chunks(row_counts: dict[str, int], max_rows: int) -> list[list[str]]:
    """Group consecutive partitions into chunks of at most ``max_rows`` rows (a chunk holds >= 1 partition)."""
    chunks: list[list[str]] = []
    current: list[str] = []
    rows = 0
    for partition in sorted(row_counts):
        count = row_counts[partition]
        if current and rows + count > max_rows:
            chunks.append(current)
            current, rows = [], 0
        current.append(partition)
        rows += count
    if current:
        chunks.append(current)
    return chunks
