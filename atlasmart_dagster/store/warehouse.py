"""The warehouse: Iceberg tables (pyiceberg, SQL catalog) read and written with DuckDB.

DuckDB writes each partition's rows to Parquet; pyiceberg then commits one
OVERWRITE snapshot that swaps the partition's old files for the new ones, so
every partition replacement is atomic and every commit is a snapshot that
certification can pin. Reads let pyiceberg *plan* the files and DuckDB *read*
them, which is an order of magnitude faster than ``scan().to_arrow()`` for
large partitions. That shortcut is valid only while tables have no delete
files; whole-file replacement never writes any, and ``data_files`` refuses to
continue if one ever appears.

Concurrent commits (the current and backfill lanes writing different days of
the same table) race on the catalog row: the loser gets
``CommitFailedException``. It is transient: reload the table and redo the
overwrite, which is idempotent because it replaces whole partitions.
"""

from __future__ import annotations

import atexit
import copy
import hashlib
import os
import random
import shutil
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property
from pathlib import Path
from typing import Callable, Mapping, Sequence

import duckdb
import pyarrow as pa
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import NoSuchTableError, ValidationException
from pyiceberg.expressions import AlwaysTrue, And, EqualTo, GreaterThanOrEqual, In, LessThanOrEqual
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.update.snapshot import ManageSnapshots
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from ..errors import EnvironmentFault, SnapshotMissing, StoreUnreadable, TransientError, is_transient
from .home import AtlasmartHome, write_fault
from .iceberg_adapter import CachedViewTransaction, data_files_for, lost_a_commit_race, planned_data_files
from .locks import home_lock
from .object_store import S3Store, object_store_fault
from .tables import NAMESPACE, TableSpec

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
# Snappy: fastest to write and read here; row groups sized for DuckDB's parallel scans.
def _literal(path) -> str:
    """A path as a SQL string literal (a home may be called "it's")."""
    return "'" + str(path).replace("'", "''") + "'"


_PARQUET = "(FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 122880)"
_WRITERS = max(2, min(4, os.cpu_count() or 2))
COMMIT_ATTEMPTS = 8
SNAPSHOT_PROPERTY_PREFIX = "atlasmart."
# The namespace property that records which home the catalog belongs to (the ledger records the same id).
HOME_ID_PROPERTY = "atlasmart.home-id"
# Called with (home, table name) after a commit's data files are written and
# before the commit. Empty in production: crash tests register a pause here to
# kill a process mid-commit (atlasmart_dagster_tests/e2e/pause_before_commit.py).
COMMIT_HOOKS: list[Callable[[AtlasmartHome, str], None]] = []
TABLE_PROPERTIES = {
    # pyiceberg re-bases a lost commit on the new head and reuses the files it
    # wrote; more attempts than the default 4 keep two lanes from starving.
    "commit.retry.num-retries": "10",
    # Every commit writes a new metadata.json; keep a bounded history of them.
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
}


def _optional_columns(spec: TableSpec) -> str:
    """The table's columns as a select list whose every column DuckDB's writer marks OPTIONAL.

    DuckDB writes a column REQUIRED when the statistics of what it copies prove
    it has no NULL, and those statistics depend on the plan, not on the rows: a
    day copied from a query of its own gets them from the query's expressions,
    the same day filtered out of a range's staged table gets the whole range's.
    The same rows would then give different bytes alone and inside a range.
    Every column is optional in the Iceberg schema; a CASE with a NULL branch
    makes it optional in every file, at no measurable cost.
    """
    return ", ".join(f'CASE WHEN "{c}" IS NULL THEN NULL ELSE "{c}" END AS "{c}"' for c in spec.column_names)


def file_name(written: Path) -> str:
    """Where a written ``<partition>.parquet`` lives under the table's data folder: named by its bytes.

    ``sales_date=2026-09-20/<SHA-256>.parquet`` (an unpartitioned table's
    ``data.parquet``: ``<SHA-256>.parquet``). Nothing of the run, the chunk or
    the time of the write is in the name, so equal bytes have equal names.
    """
    with open(written, "rb") as stream:
        digest = hashlib.file_digest(stream, "sha256").hexdigest()
    return f"{digest}.parquet" if written.stem == "data" else f"{written.stem}/{digest}.parquet"


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
    """The path DuckDB reads a table file by: a local path, or the ``s3://`` URL as it is (``use_object_store``)."""
    return uri.removeprefix("file://")


def reachable_files(table: Table) -> list[str]:
    """Local paths of every file needed to read any retained snapshot of one table.

    Data files count only where an entry has them live (added or existing):
    an OVERWRITE snapshot also lists the files it replaced, as DELETED
    entries, and no read of any retained snapshot opens those.
    """
    files = {_local_path(table.metadata_location)}
    for snapshot in table.snapshots():
        files.add(_local_path(snapshot.manifest_list))
        for manifest in snapshot.manifests(table.io):
            files.add(_local_path(manifest.manifest_path))
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                files.add(_local_path(entry.data_file.file_path))
    return sorted(files)


_ENGINE: duckdb.DuckDBPyConnection | None = None
_ENGINE_LOCK = threading.Lock()
_ENGINE_STORES: set[int] = set()


def use_object_store(store: S3Store) -> None:
    """Let every connection of the process's DuckDB engine read and write ``s3://`` paths of ``store``.

    DuckDB's own S3 extension (httpfs) is not in the wheel and is downloaded on
    first use, which a locked-down worker cannot do; a filesystem registered on
    the engine (pyarrow's S3 client, through fsspec) serves its cursors instead.
    One registration per engine: DuckDB keeps one filesystem per protocol.
    """
    duckdb_connection().close()  # the engine exists
    with _ENGINE_LOCK:
        if _ENGINE is not None and id(_ENGINE) not in _ENGINE_STORES:
            store.register(_ENGINE)
            _ENGINE_STORES.add(id(_ENGINE))


# Rows a build or a per-day read handles at once: days are grouped into chunks of at most this many rows
# (plan_chunks), so memory follows the chunk, not the range.
DEFAULT_CHUNK_ROWS = 2_000_000


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


@atexit.register
def _close_engine() -> None:
    """Close the shared engine before the interpreter finalizes.

    A module global outlives DuckDB's bindings at shutdown, and nanobind (which
    they are built with) reports every DuckDB object still alive then as a
    ~40-line "leaked instances" block: the engine and the types it keeps alive.
    """
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is not None:
            _ENGINE_STORES.discard(id(_ENGINE))
            _ENGINE.close()
            _ENGINE = None


@dataclass(frozen=True)
class CatalogProbe:
    """What a catalog holds, read without creating anything: whether it exists, its home id, its tables."""

    present: bool
    home_id: str | None = None
    tables: dict[str, str] = field(default_factory=dict)  # AtlasMart table name -> current metadata location


_SQLITE_REFUSED = (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR,
                   sqlite3.SQLITE_PERM)


class Warehouse:
    """Iceberg tables of one AtlasMart home.

    Loading a table parses its metadata JSON (~4 ms, growing with history) and
    planning a scan reads manifests (~10 ms); a run does both dozens of times
    for the same few versions. Both are cached, and both caches are exact:
    a table is reused only while the catalog still points at the metadata file
    it was parsed from (one indexed SQLite lookup), and a plan is keyed by a
    snapshot id, which names immutable content, and served only while that
    snapshot is still in the table's metadata (so expiry is honoured).

    A read of a version named by its snapshot id (a certified one, a pinned
    build) that the table does not have is ``SnapshotMissing``, never an empty
    table.
    """

    _PLAN_CACHE_SIZE = 512

    def __init__(self, home: AtlasmartHome, chunk_rows: int = DEFAULT_CHUNK_ROWS):
        self.home = home.ensure()
        self.chunk_rows = chunk_rows
        self._tables: dict[str, Table] = {}
        self._plans: OrderedDict[tuple, list[str]] = OrderedDict()
        self._cache_lock = threading.Lock()
        # Set by the platform while the home is empty: called before the first write, to
        # create the home's stores together (store/platform.py); a read creates no catalog.
        self.before_first_use: Callable[[], None] | None = None
        # On an object store, table files are written in a local folder and then put in the bucket.
        self.objects = home.objects
        if self.objects is not None:
            use_object_store(self.objects)

    @cached_property
    def catalog(self) -> SqlCatalog:
        if self.home.database_url is None and self.home.catalog_db.is_file():
            # Initialised already: nothing to race for (and a read-only home has no lock file to take).
            return self._open_catalog()
        # Two runs starting on a fresh home would both create the catalog's
        # tables ("table iceberg_tables already exists"): initialise under a lock.
        with home_lock(self.home, "catalog"):
            return self._open_catalog()

    def _open_catalog(self) -> SqlCatalog:
        try:
            catalog = SqlCatalog(
                NAMESPACE,
                uri=self.home.catalog_uri,
                warehouse=self.home.warehouse_uri,
                **(self.home.object_root.iceberg_properties() if self.home.object_root else {}),
            )
            catalog.create_namespace_if_not_exists(NAMESPACE)
        except DBAPIError as exc:
            fault = self._fault(exc)
            if fault is None:
                raise
            raise fault from exc
        return catalog

    def _fault(self, exc: BaseException) -> EnvironmentFault | None:
        """The one-line environment fault behind a failed write of the embedded catalog or a table file, if any."""
        cause = exc.orig if isinstance(exc, DBAPIError) else exc
        if self.objects is not None and not isinstance(cause, sqlite3.Error | DBAPIError):
            found = object_store_fault(exc, self.home.object_root.where)
            return found if isinstance(found, EnvironmentFault) else None
        if isinstance(cause, sqlite3.Error) and self.home.database_url is None:
            if (getattr(cause, "sqlite_errorcode", None) or 0) & 0xFF not in _SQLITE_REFUSED:
                return None
            fault = write_fault(self.home.catalog_db)
        elif isinstance(cause, duckdb.IOException | OSError) and not isinstance(cause, FileNotFoundError):
            fault = write_fault(self.home.warehouse_dir)
        else:
            return None
        return EnvironmentFault(fault.message) if fault else None

    # -- the catalog's identity -------------------------------------------
    def probe_catalog(self) -> CatalogProbe:
        """The catalog's state, read without creating it (a missing catalog stays missing)."""
        if self.home.database_url is not None:
            return self._probe_team_catalog()
        path = self.home.catalog_db
        if not path.is_file():
            return CatalogProbe(present=False)
        con = None
        for flags in ("mode=ro", "immutable=1"):  # immutable: a read-only file system, where nobody writes
            try:
                con = sqlite3.connect(f"{path.as_uri()}?{flags}", uri=True, timeout=60)
                names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                break
            except sqlite3.DatabaseError as exc:
                if con is not None:
                    con.close()
                    con = None
                code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
                if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
                    raise StoreUnreadable(f"the catalog at {path} is not a readable SQLite database ({exc}): "
                                          f"{self.home.restore_hint}") from exc
                if code not in _SQLITE_REFUSED:
                    raise
                if flags == "immutable=1":
                    fault = write_fault(path)
                    raise EnvironmentFault(fault.message if fault else f"cannot read {path} ({exc})") from exc
        try:
            return self._read_probe(con, names, "?")
        finally:
            con.close()

    def _probe_team_catalog(self) -> CatalogProbe:
        from .ledger.postgres_engine import connect_team_database  # the `team` extra: psycopg2

        con = connect_team_database(self.home.database_url)
        try:
            with con.cursor() as cur:
                cur.execute("SELECT to_regclass('iceberg_tables') IS NOT NULL, "
                            "to_regclass('iceberg_namespace_properties') IS NOT NULL")
                tables, properties = cur.fetchone()
                names = {n for n, there in (("iceberg_tables", tables), ("iceberg_namespace_properties", properties))
                         if there}
                return self._read_probe(cur, names, "%s")
        finally:
            con.close()

    @staticmethod
    def _read_probe(con, names: set[str], mark: str) -> CatalogProbe:
        """Home id and AtlasMart tables from a connection (sqlite3) or cursor (psycopg2) of the catalog."""
        if "iceberg_tables" not in names:
            return CatalogProbe(present="iceberg_namespace_properties" in names)

        def rows(sql: str, args: tuple) -> list:
            result = con.execute(sql.replace("?", mark), args)
            return (result if result is not None else con).fetchall()

        tables = {name: location for name, location in rows(
            "SELECT table_name, metadata_location FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ?",
            (NAMESPACE, NAMESPACE)) if location}
        home_id = None
        if "iceberg_namespace_properties" in names:
            found = rows("SELECT property_value FROM iceberg_namespace_properties WHERE catalog_name = ? "
                         "AND namespace = ? AND property_key = ?", (NAMESPACE, NAMESPACE, HOME_ID_PROPERTY))
            home_id = found[0][0] if found else None
        return CatalogProbe(present=True, home_id=home_id, tables=tables)

    def stamp_catalog(self, home_id: str) -> None:
        """Record ``home_id`` in the catalog (creating it, on the first use of an empty home)."""
        try:
            self.catalog.update_namespace_properties(NAMESPACE, updates={HOME_ID_PROPERTY: home_id})
        except DBAPIError as exc:
            fault = self._fault(exc)
            if fault is None:
                raise
            raise fault from exc

    # -- tables -----------------------------------------------------------
    def _metadata_location(self, spec: TableSpec) -> str | None:
        """Where the catalog says the table's current metadata is (None: no such table)."""
        if self.before_first_use is not None and self.home.database_url is None and not self.home.catalog_db.exists():
            return None  # an empty home whose catalog no write created yet: reading it creates nothing
        statement = select(IcebergTables.metadata_location).where(
            IcebergTables.catalog_name == self.catalog.name,
            IcebergTables.table_namespace == NAMESPACE,
            IcebergTables.table_name == spec.name,
        )
        with self.catalog.engine.connect() as connection:
            return connection.execute(statement).scalar()

    def existing(self, spec: TableSpec) -> Table | None:
        """The table at the catalog's current metadata (parsed once per metadata file), or None if never created."""
        location = self._metadata_location(spec)
        if location is None:
            return None
        with self._cache_lock:
            cached = self._tables.get(spec.name)
        if cached is not None and cached.metadata_location == location:
            return cached
        try:
            table = self.catalog.load_table(spec.identifier)
        except NoSuchTableError:
            return None
        with self._cache_lock:
            self._tables[spec.name] = table
        return table

    def table(self, spec: TableSpec) -> Table:
        """The table with its current metadata, created on first use."""
        table = self.existing(spec)
        if table is not None:
            return table
        if self.before_first_use is not None:
            self.before_first_use()
        with home_lock(self.home, "catalog"):
            return self.catalog.create_table_if_not_exists(
                spec.identifier,
                schema=spec.iceberg_schema(),
                partition_spec=spec.partition_spec(),
                properties=TABLE_PROPERTIES,
            )

    def data_dir(self, spec: TableSpec) -> Path:
        """Where the table's data files are written (one sub-folder per partition, ``file_name``).

        On an object store, the local folder they are written in before they
        are put at the same place under ``data_uri``.
        """
        if self.objects is not None:
            return self.home.root / "uploads" / NAMESPACE / spec.name / "data"
        return self.home.warehouse_dir / NAMESPACE / spec.name / "data"

    def data_uri(self, spec: TableSpec) -> str:
        """The location of the table's data files, as Iceberg records them (``file://`` or ``s3://``)."""
        return f"{self.home.warehouse_uri}/{NAMESPACE}/{spec.name}/data"

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
        select_sql: str | Mapping[str, str],
        partitions: Sequence[str] | None,
        properties: dict[str, str] | None = None,
    ) -> int | None:
        """Atomically replace ``partitions`` (all rows if unpartitioned) with the rows of ``select_sql``.

        ``select_sql`` may instead map each partition to a query of its own rows
        (a day whose rows come from its own files, as raw batches do): each day
        is then written exactly as a day alone is, with no staged copy of the
        whole range.

        DuckDB writes the rows straight to Parquet, one file per partition in
        the table's canonical order (deterministic bytes), named by their
        bytes (``file_name``); one Iceberg OVERWRITE snapshot then swaps the
        partitions' old files for the new ones. Returns the id of the snapshot holding the new
        state. Refuses rows outside the named partitions, so a bug can never
        write into a day it was not asked to replace.
        """
        if spec.partition_column is not None and not partitions:
            raise ValueError(f"overwrite of {spec.name} needs the partitions it replaces")
        try:
            files = self._write_files(spec, con, select_sql, partitions)
        except (duckdb.IOException, OSError) as exc:
            fault = self._fault(exc)
            if fault is None:
                raise
            raise fault from exc
        props = {SNAPSHOT_PROPERTY_PREFIX + k: str(v) for k, v in (properties or {}).items()}
        if partitions is not None:
            props[SNAPSHOT_PROPERTY_PREFIX + "partitions"] = ",".join(partitions)
        last_error: BaseException | None = None
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                # A private copy: a commit updates its Table in place, and the
                # cached one may be in use by a reader in another thread.
                table = copy.copy(self.table(spec))
                snapshot_id = self._replace(table, spec, partitions, files, props)
                with self._cache_lock:
                    self._tables[spec.name] = table
                return snapshot_id
            except Exception as exc:  # noqa: BLE001 - classified below
                fault = self._fault(exc)
                if fault is not None:  # a read-only home or a full disk: no retry cures it
                    raise fault from exc
                # ValidationException: another writer replaced the same partition
                # between our read and our commit. Replacing it again from our
                # inputs is what a sequential run would have done (last writer wins).
                # A commit on another ref meanwhile (the certified branch) is redone the same way.
                if not _lost_a_race(exc):
                    raise
                last_error = exc
                # Exponential backoff with full jitter: concurrent writers spread out.
                time.sleep(random.uniform(0, min(2.0, 0.05 * 2**attempt)))
        raise TransientError(
            f"commit to {spec.name} for {','.join(partitions or ['all'])} kept conflicting "
            f"after {COMMIT_ATTEMPTS} attempts: {last_error}"
        ) from last_error

    def _replace(
        self, table: Table, spec: TableSpec, partitions: Sequence[str] | None, files: list[str], props: dict[str, str]
    ) -> int | None:
        """One transaction, one OVERWRITE snapshot: drop the partitions' current files, add ``files``.

        A single snapshot (rather than pyiceberg's delete + add_files, which
        makes two) means no snapshot in the history ever shows the partition
        empty, and it halves the commit cost. Every data file belongs to one
        day (identity partitioning), so the files the partition filter plans
        are exactly the ones to replace. pyiceberg validates on commit that
        they still exist, so a concurrent replacement of the same day fails
        with ValidationException and is redone from the new head. A day
        rewritten with unchanged rows has the same file name as before: the
        snapshot deletes and adds that one path (pyiceberg keeps it once), so
        the validation still guards it.
        """
        current = table.current_snapshot()
        replaced = (
            planned_data_files(table.scan(row_filter=_partition_filter(spec, partitions)))
            if current is not None
            else []
        )
        if not replaced and not files:
            # Nothing to delete, nothing to add: the state is unchanged (None for a table never written).
            return current.snapshot_id if current else None
        with CachedViewTransaction(table) as transaction:
            if transaction.table_metadata.name_mapping() is None:
                # DuckDB writes Parquet without Iceberg field ids: readers map columns by name.
                mapping = transaction.table_metadata.schema().name_mapping.model_dump_json()
                transaction.set_properties(**{TableProperties.DEFAULT_NAME_MAPPING: mapping})
            added = data_files_for(table, transaction.table_metadata, files)
            with transaction.update_snapshot(snapshot_properties=props).overwrite() as overwrite:
                for data_file in replaced:
                    overwrite.delete_data_file(data_file)
                for data_file in added:
                    overwrite.append_data_file(data_file)
            for hook in COMMIT_HOOKS:
                hook(self.home, spec.name)
        return table.current_snapshot().snapshot_id

    # -- refs -------------------------------------------------------------
    def ref_snapshot_id(self, spec: TableSpec, ref: str) -> int | None:
        """The snapshot a branch or tag of the table points at (None: no table, or no such ref)."""
        table = self.existing(spec)
        found = table.metadata.refs.get(ref) if table is not None else None
        return found.snapshot_id if found is not None else None

    def ref_state(self, spec: TableSpec, ref: str, key: str) -> tuple[int | None, str | None, frozenset[int]]:
        """A ref's snapshot id, a table property and every snapshot id the table still has, read from one
        version of the metadata (they commit together)."""
        table = self.existing(spec)
        if table is None:
            return None, None, frozenset()
        found = table.metadata.refs.get(ref)
        kept = frozenset(s.snapshot_id for s in table.metadata.snapshots)
        return (found.snapshot_id if found is not None else None), table.metadata.properties.get(key), kept

    def publish_branch(
        self,
        spec: TableSpec,
        branch: str,
        sources: dict[str, int | None],
        *,
        table_properties: dict[str, str],
        snapshot_properties: dict[str, str],
        tags: dict[str, int] | None = None,
    ) -> int:
        """One commit on ``branch``: each day of ``sources`` holds the files it had at its snapshot (None: no rows).

        No data is written: the branch's snapshot references the data files
        ``main`` committed at each named snapshot (identity partitioning, so
        a day's files are exactly the ones its partition filter plans), and
        drops the files it held for those days. The table properties and the
        new tags are set in the same commit, so a reader never sees a branch
        and an index that disagree. Days not named are untouched. The commit
        asserts the branch head it started from: two publishers racing
        conflict, and the loser redoes its plan from the new head.
        """
        props = {SNAPSHOT_PROPERTY_PREFIX + k: str(v) for k, v in snapshot_properties.items()}
        last_error: BaseException | None = None
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                table = copy.copy(self.table(spec))
                snapshot_id = self._publish(table, spec, branch, sources, table_properties, props, tags or {})
                with self._cache_lock:
                    self._tables[spec.name] = table
                return snapshot_id
            except SnapshotMissing:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below
                fault = self._fault(exc)
                if fault is not None:
                    raise fault from exc
                if not _lost_a_race(exc):
                    raise  # (a commit on main meanwhile is a lost race too: redone from the new head)
                last_error = exc
                time.sleep(random.uniform(0, min(2.0, 0.05 * 2**attempt)))
        raise TransientError(f"publishing {spec.name}@{branch} kept conflicting after {COMMIT_ATTEMPTS} attempts: "
                             f"{last_error}") from last_error

    def _publish(self, table: Table, spec: TableSpec, branch: str, sources: dict[str, int | None],
                 table_properties: dict[str, str], props: dict[str, str], tags: dict[str, int]) -> int:
        head = table.metadata.refs.get(branch)
        days = sorted(sources)

        def planned(snapshot_id: int, of_days: list[str]) -> dict[str, list]:
            by_day: dict[str, list] = {}
            scan = table.scan(row_filter=_partition_filter(spec, of_days), snapshot_id=snapshot_id)
            for data_file in planned_data_files(scan):  # raises on delete files: the branch cannot share them
                day = date.fromordinal(_EPOCH_ORDINAL + data_file.partition[0]).isoformat()
                by_day.setdefault(day, []).append(data_file)
            return by_day

        held = planned(head.snapshot_id, days) if head is not None and days else {}
        wanted: dict[str, list] = {}
        by_snapshot: dict[int, list[str]] = {}
        for day, snapshot_id in sources.items():
            if snapshot_id is not None:
                by_snapshot.setdefault(snapshot_id, []).append(day)
        for snapshot_id, of_days in sorted(by_snapshot.items()):
            if table.snapshot_by_id(snapshot_id) is None:
                raise self._snapshot_missing(spec, snapshot_id, False)
            wanted.update(planned(snapshot_id, sorted(of_days)))
        removed, added = [], []
        for day in days:
            before = {f.file_path: f for f in held.get(day, [])}
            after = {f.file_path: f for f in wanted.get(day, [])}
            removed += [f for path, f in before.items() if path not in after]
            added += [f for path, f in after.items() if path not in before]
        with CachedViewTransaction(table) as transaction:
            if table_properties:
                transaction.set_properties(**table_properties)
            with transaction.update_snapshot(snapshot_properties=props, branch=branch).overwrite() as overwrite:
                for data_file in removed:
                    overwrite.delete_data_file(data_file)
                for data_file in added:
                    overwrite.append_data_file(data_file)
            new_tags = {name: sid for name, sid in tags.items()
                        if name not in transaction.table_metadata.refs and table.snapshot_by_id(sid) is not None}
            if new_tags:
                with ManageSnapshots(transaction) as refs:
                    for name, snapshot_id in sorted(new_tags.items()):
                        refs.create_tag(snapshot_id, name)
            for hook in COMMIT_HOOKS:
                hook(self.home, spec.name)
        return table.metadata.refs[branch].snapshot_id

    def _write_files(
        self, spec: TableSpec, con: duckdb.DuckDBPyConnection, select_sql: str | Mapping[str, str],
        partitions: Sequence[str] | None,
    ) -> list[str]:
        """Parquet files (URIs) holding the rows of ``select_sql``: one per partition present, named by content.

        Each file is written in a folder of this write's own, checked, then
        placed at ``<partition>/<SHA-256 of its bytes>.parquet`` (``file_name``).
        A day's file is therefore the same path and the same bytes whether the
        day was written alone or inside a range, in this home or another; a
        rewrite of unchanged rows lands on the path it already has, with the
        bytes it already has (an atomic rename, so a reader never sees half a
        file). On an object store the local files are put in the bucket at the
        same names, then removed: DuckDB's COPY through the fsspec bridge is
        one unparallelised stream per file, an upload of a finished file is
        not, and a stray-row refusal never leaves an object behind.
        """
        folder = self.data_dir(spec) / uuid.uuid4().hex
        try:
            written = self._write_local_files(spec, con, select_sql, partitions, folder)
            with ThreadPoolExecutor(max_workers=_WRITERS) as pool:
                names = list(pool.map(file_name, written))
                if self.objects is None:
                    targets = [self.data_dir(spec) / name for name in names]
                    for local, target in zip(written, targets):
                        target.parent.mkdir(parents=True, exist_ok=True)
                        os.replace(local, target)
                    return [f"file://{target}" for target in targets]
                urls = [f"{self.data_uri(spec)}/{name}" for name in names]
                list(pool.map(self.objects.upload, written, urls))
                return urls
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _write_local_files(
        self, spec: TableSpec, con: duckdb.DuckDBPyConnection, select_sql: str | Mapping[str, str],
        partitions: Sequence[str] | None, folder: Path,
    ) -> list[Path]:
        """The Parquet files of ``_write_files``, written in ``folder`` as ``<partition>.parquet``.

        Rows are cast to the table's types and sorted by the grain (a total
        order), so the same rows always give the same bytes. The sort is what
        byte-identical replay rests on, not the fingerprint (which orders rows
        itself): unsorted, the gate's window output reaches staging in a
        different order on every run. On one 1M-row day it costs ~0.06 s for
        raw, ~0.1 s for staging and ~0.03 s for the fact (~0.2 s of ~2.2 s).
        A day's rows are written by the same COPY options and select list
        (``_optional_columns``) whether it is alone or one of a range.
        """
        folder.mkdir(parents=True, exist_ok=True)
        if isinstance(select_sql, Mapping):
            return self._write_each_day(spec, select_sql, partitions, folder)
        column = spec.partition_column
        if column is None or len(partitions) == 1:
            return _write_one_file(spec, con, select_sql, None if column is None else partitions[0], folder)
        casts = ", ".join(f'CAST("{c.name}" AS {c.sql_type}) AS "{c.name}"' for c in spec.columns)
        optional = _optional_columns(spec)
        grain = ", ".join(spec.grain)
        # Several partitions: sort once into a table both cores can read (and
        # skip to each day in), then one file per day, written two at a time.
        # Each day is copied out of a sort of its own rows, as a day alone is:
        # the writer cuts row groups where its input chunks end, and a day's
        # rows scanned straight from the staged table start mid-chunk, wherever
        # the day before ended, so a day of more than one row group would be
        # cut differently inside a range (re-sorting sorted rows costs little).
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
                        f"COPY (SELECT {optional} FROM {staged} WHERE {column} = DATE '{day}' ORDER BY {grain}) "
                        f"TO {_literal(targets[day])} {_PARQUET}"
                    )
                finally:
                    cursor.close()

            with ThreadPoolExecutor(max_workers=_WRITERS) as pool:
                list(pool.map(write, present))
            return [targets[day] for day in present]
        finally:
            con.execute(f"DROP TABLE IF EXISTS {staged}")

    def _write_each_day(
        self, spec: TableSpec, day_sql: Mapping[str, str], partitions: Sequence[str] | None, folder: Path
    ) -> list[Path]:
        """Each day's file from its own query, as ``_write_one_file`` writes a day alone, two at a time.

        Nothing of the range is staged: a day's rows are read, cast, sorted and
        written once. Every day is written (or refused) before any is returned.
        """
        stray = sorted(set(day_sql) - set(partitions or ()))
        if spec.partition_column is None or stray:
            raise ValueError(f"{spec.name}: per-day rows for days that are not being replaced: {stray or 'all'}")

        def write(day: str) -> list[Path]:
            cursor = duckdb_connection()
            try:
                return _write_one_file(spec, cursor, day_sql[day], day, folder)
            finally:
                cursor.close()

        with ThreadPoolExecutor(max_workers=_WRITERS) as pool:
            written = list(pool.map(write, sorted(day_sql)))
        return [path for paths in written for path in paths]

    # -- reads ------------------------------------------------------------
    def data_files(
        self, spec: TableSpec, partitions: Sequence[str] | None = None, snapshot_id: int | None = None
    ) -> list[str]:
        """Local paths of the data files holding ``partitions`` at ``snapshot_id`` (default: current)."""
        table = self.existing(spec)
        if table is None:
            return []
        snapshot = table.current_snapshot() if snapshot_id is None else table.snapshot_by_id(snapshot_id)
        if snapshot is None:
            return []  # never written, or a snapshot that is not (or no longer) in the table
        key = (spec.name, snapshot.snapshot_id, None if partitions is None else tuple(sorted(set(partitions))))
        with self._cache_lock:
            if key in self._plans:
                self._plans.move_to_end(key)
                return list(self._plans[key])
        scan = table.scan(row_filter=_partition_filter(spec, partitions), snapshot_id=snapshot.snapshot_id)
        files = sorted(_local_path(f.file_path) for f in planned_data_files(scan))  # raises on delete files
        with self._cache_lock:
            self._plans[key] = files
            while len(self._plans) > self._PLAN_CACHE_SIZE:
                self._plans.popitem(last=False)
        return list(files)

    def _snapshot_missing(self, spec: TableSpec, snapshot_id: int, no_table: bool) -> SnapshotMissing:
        where = (f"the table is not in the catalog {self.home.catalog_where}" if no_table
                 else "the table does not have it")
        return SnapshotMissing(
            f"{spec.name}: version {snapshot_id} (a snapshot the ledger names) cannot be read, {where} (expired, "
            f"or the catalog was replaced): {self.home.restore_hint}; atlasmart verify lists what is affected"
        )

    def partition_row_counts(
        self, spec: TableSpec, partitions: Sequence[str], snapshot_id: int | None = None
    ) -> dict[str, int]:
        """Rows per partition from Iceberg file statistics (no data is read)."""
        counts = {p: 0 for p in partitions}
        table = self.existing(spec) if spec.partition_column is not None else None
        if table is None or (snapshot_id is None and table.current_snapshot() is None):
            return counts
        for data_file in planned_data_files(table.scan(row_filter=_partition_filter(spec, partitions), snapshot_id=snapshot_id)):
            # Identity partition on a date column: the value is days since the epoch.
            day = date.fromordinal(_EPOCH_ORDINAL + data_file.partition[0]).isoformat()
            if day in counts:
                counts[day] += data_file.record_count
        return counts

    def read_chunks(
        self, spec: TableSpec, partitions: Sequence[str], snapshot_id: int | None = None
    ) -> list[list[str]]:
        """The partitions in consecutive groups of at most ``chunk_rows`` rows (file statistics; no data is read).

        A read that aggregates per day (controls, fingerprints) holds all its
        groups at once: one query over a range keeps every day's distinct
        orders in memory together, so its peak grew with the range (1.3 GB
        for a year of 100k-row days, 3.2 GB for three). Read a chunk at a time
        it costs what one chunk of a build does, whatever the range.
        """
        if len(set(partitions)) <= 1:
            return [list(partitions)] if partitions else []
        return plan_chunks(self.partition_row_counts(spec, partitions, snapshot_id), self.chunk_rows)

    def relation_sql(
        self, spec: TableSpec, partitions: Sequence[str] | None = None, snapshot_id: int | None = None
    ) -> str:
        """A DuckDB SELECT over the table's rows (optionally some partitions, at a snapshot).

        A snapshot asked for by id that the table does not have (expired, or a
        catalog that is not the one the ledger was written with) is
        ``SnapshotMissing``: a read of a named version is never an empty table.
        """
        if snapshot_id is not None:
            table = self.existing(spec)
            if table is None or table.snapshot_by_id(snapshot_id) is None:
                raise self._snapshot_missing(spec, snapshot_id, table is None)
        files = self.data_files(spec, partitions, snapshot_id)
        if not files:
            return spec.empty_select_sql()
        listed = ", ".join(_literal(f) for f in files)
        columns = ", ".join(spec.column_names)
        sql = f"SELECT {columns} FROM read_parquet([{listed}], union_by_name=true)"
        if spec.partition_column is not None and partitions is not None:
            sql += f" WHERE {day_filter(spec.partition_column, partitions)}"
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


def _write_one_file(
    spec: TableSpec, con: duckdb.DuckDBPyConnection, select_sql: str, partition: str | None, folder: Path
) -> list[Path]:
    """One file of ``select_sql``'s rows in canonical order (a day, or an unpartitioned table), then proof no row strayed.

    A day with no row publishes no file.
    """
    casts = ", ".join(f'CAST("{c.name}" AS {c.sql_type}) AS "{c.name}"' for c in spec.columns)
    column = spec.partition_column
    target = folder / ("data.parquet" if partition is None else f"{column}={partition}.parquet")
    con.execute(f"COPY (SELECT {_optional_columns(spec)} FROM (SELECT {casts} FROM ({select_sql})) "
                f"ORDER BY {', '.join(spec.grain)}) TO {_literal(target)} {_PARQUET}")
    if partition is not None:
        stray, rows = con.sql(
            f"SELECT count(*) FILTER (WHERE {column} IS DISTINCT FROM DATE '{partition}'), count(*) "
            f"FROM read_parquet({_literal(target)})"
        ).fetchall()[0]
        if stray:
            target.unlink()
            raise ValueError(f"{spec.name}: {stray} rows outside the partition {partition} being replaced")
        if rows == 0:
            target.unlink()
            return []
    return [target]


# Above this many days a day filter is a semi-join on a list instead of a literal IN list:
# DuckDB checks a literal IN list against every file's statistics, which at a year of
# day files cost 0.08 s per read (a tenth of certifying a year took it); the semi-join
# costs 0.5 ms more on a few days, so short lists keep the literal form.
_LITERAL_DAYS_MAX = 48


def _lost_a_race(exc: BaseException) -> bool:
    """Whether a failed commit is redone from the table's new head (a transient fault or a concurrent commit)."""
    return is_transient(exc) or isinstance(exc, ValidationException) or lost_a_commit_race(exc)


def day_filter(column: str, partitions: Sequence[str]) -> str:
    """SQL true for rows whose ``column`` is one of ``partitions`` (ISO days), at any length."""
    days = ", ".join(f"DATE '{date.fromisoformat(p).isoformat()}'" for p in partitions)
    if not partitions:
        return "false"
    if len(partitions) <= _LITERAL_DAYS_MAX:
        return f"{column} IN ({days})"
    return f"{column} IN (SELECT unnest([{days}]))"


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
