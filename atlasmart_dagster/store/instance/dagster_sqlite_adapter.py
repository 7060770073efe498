"""Dagster's SQLite storage with the event log's connections kept open: the embedded instance's storage.

Dagster's ``SqliteEventLogStorage`` builds a new SQLAlchemy engine and a new
SQLite connection for every statement group it writes, and closes it again.
Closing the last connection to a WAL database checkpoints and removes its
write-ahead log, so every event costs two or three open/commit/checkpoint
cycles (an asset materialization writes the run's shard and the index, a
check evaluation three times). A range run writes thousands of events, and
that bookkeeping, not the data, was most of the time of
``dagster asset materialize`` on the embedded instance.

``PooledSqliteEventLogStorage`` keeps one engine with a small connection pool
per shard (the index and the most recent run shards). Everything else is
Dagster's own: the same files and schema (any Dagster process, pooled or
not, reads and writes them), the same per-process lock, the same busy
timeout. What it must keep so Dagster's other readers still see what it
writes:

* after each write to a run's shard it checkpoints that shard (passively):
  Dagster's live run view (``watch``) listens for changes of the shard's
  ``.db`` file, which a write-ahead log alone would not touch;
* a shard file that disappeared (``wipe``, another process deleting a run)
  is never written through an old connection, which would write into a
  deleted file: its engine is dropped and the shard is created again;
* a forked child never uses its parent's connections.

``store_event_batch`` (what Dagster calls with a step's materializations of
a range when ``DAGSTER_EVENT_BATCH_SIZE`` is set; the code location sets it,
see ``definitions.py``) stores the whole batch in one transaction per shard
instead of one per event: all of it or, if any event fails, none of it (Dagster
then falls back to storing the events one by one). Its runs of consecutive
materializations and observations are stored in bulk, each row serialised
once and each shard's rows through one compiled statement, with the rows
Dagster's own ``store_event`` writes (a test compares every table). Inside a batch, the asset
index row of each asset key (``asset_keys``: the newest materialization, run
and timestamp) is written once per key and kind of event, by the batch's last
such event, not once per event: each kind of asset event overwrites a fixed
set of that row's columns, so the row ends the same, and a range's
materializations of one asset no longer rewrite it once per day.

Check evaluations held by a step (``held_check_evaluations.py``) are
written through ``store_event_batch``: one transaction per shard.

``PooledSqliteStorage`` is ``DagsterSqliteStorage`` (the ``storage: sqlite``
default, same folders under ``base_dir``) with this event log; the embedded
``dagster.yaml`` selects it as ``storage: custom``. This is the one place
AtlasMart subclasses Dagster's storage internals;
``atlasmart_dagster_tests/store/test_dagster_sqlite_adapter.py`` pins what it
relies on (the ``_connect(shard)`` hook, the folder layout, watchers seeing
its writes) and fails on an upgrade that changes it.

Creating the storage the first time is serialised across processes. Dagster
creates each SQLite database (``runs.db``, ``schedules.db``, the event log's
shards) on first open, checks its ``alembic_version`` and stamps it, without a
lock across processes: two first commands at once on a fresh folder could both
stamp, leaving two rows in ``alembic_version`` (one at the head, one at the
revision Dagster stamps on tables it finds without a version), and every later
open failed with "more than one head present". Here every creation and stamp
happens under an ``flock`` on ``.atlasmart-storage.lock`` in the instance
folder, and before a database is opened a doubled version is repaired when both
rows lie on one migration line (the newest is kept; the tables are Dagster's
current ones) or refused with the commands that fix it
(``repair_schema_versions``). ``atlasmart dagster-home`` creates the whole
storage this way before it returns, so no run ever starts on a fresh folder.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import sys
import threading
from collections import OrderedDict
from itertools import groupby
from contextlib import contextmanager
from typing import Any, Iterator

import sqlalchemy as db
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError
from dagster._core.events import DagsterEventType
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.runs.sqlite import sqlite_run_storage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sql import get_alembic_config
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage
from dagster._serdes import ConfigurableClassData
from dagster._utils import mkdir_p
from sqlalchemy.pool import QueuePool

from .held_check_evaluations import HeldCheckEvaluations
from .remembered_tables import RememberedTables

# Dagster's own busy timeout for its SQLite shards (seconds).
_BUSY_TIMEOUT_SECONDS = 15
# Engines kept open: the index plus the run shards a process is writing or
# reading now (a range run writes one; the webserver reads a few).
_OPEN_SHARDS = 6
# The lock file, in the instance folder, held while a database of its storage is created or stamped.
STORAGE_LOCK_NAME = ".atlasmart-storage.lock"
# Where Dagster's SQLite storage keeps its databases under the instance folder.
RUNS_DB = os.path.join("history", "runs.db")
INDEX_DB = os.path.join("history", "runs", f"{INDEX_SHARD_NAME}.db")
SCHEDULES_DB = os.path.join("schedules", "schedules.db")

# The storage lock held by this process: lock file path -> [depth, fd]. Re-entrant within the
# process (the storage's constructor holds it while the event log it builds takes it again), one
# flock across processes; a thread waits for the thread that holds it.
_held: dict[str, list[int]] = {}
_held_guard = threading.RLock()


def _forget_held_locks() -> None:
    """In a forked child: the parent's lock and its holder thread are not the child's (its copy of the file is closed)."""
    global _held_guard
    _held_guard = threading.RLock()
    for _depth, handle in _held.values():
        os.close(handle)  # the parent's lock stays held by the parent
    _held.clear()


os.register_at_fork(after_in_child=_forget_held_locks)


@contextmanager
def storage_lock(folder: str) -> Iterator[None]:
    """Hold the exclusive storage lock of the instance folder ``folder`` (waits for its holder)."""
    path = os.path.join(os.path.abspath(folder), STORAGE_LOCK_NAME)
    with _held_guard:
        state = _held.get(path)
        if state is None:
            mkdir_p(os.path.dirname(path))
            handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX)
            except BaseException:
                os.close(handle)
                raise
            state = _held[path] = [0, handle]
        state[0] += 1
        try:
            yield
        finally:
            state[0] -= 1
            if state[0] == 0:
                del _held[path]
                os.close(state[1])  # releases the lock


def _instance_folder_of_event_log(base_dir: str) -> str:
    """The instance folder holding the event log in ``base_dir`` (``<folder>/history/runs``), else ``base_dir``."""
    base = os.path.abspath(base_dir)
    parent, runs = os.path.split(base)
    grandparent, history = os.path.split(parent)
    return grandparent if (history, runs) == ("history", "runs") else base


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _newest_on_one_line(revisions: set[str]) -> str | None:
    """The revision of ``revisions`` that all the others precede in Dagster's migrations, None if there is none."""
    script = ScriptDirectory.from_config(get_alembic_config(sqlite_run_storage.__file__))
    for candidate in revisions:
        try:
            line = {rev.revision for rev in script.iterate_revisions(candidate, "base")}
        except RevisionError:  # a revision this Dagster does not ship
            return None
        if revisions <= line:
            return candidate
    return None


def repair_schema_versions(db_path: str, instance_folder: str) -> None:
    """Leave at most one row in ``alembic_version`` of the SQLite database ``db_path`` (a missing one is left alone).

    Rows that lie on one migration line are a first creation that two processes
    raced (the tables are the newest's): the newest is kept, and said once on
    stderr. Rows on different lines (or unknown to this Dagster) are refused with
    ``StoreUnreadable`` naming the database and the commands that fix it. Call it
    under ``storage_lock``.
    """
    if not os.path.exists(db_path):
        return
    con = sqlite3.connect(db_path, timeout=_BUSY_TIMEOUT_SECONDS)
    try:
        if con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'").fetchone() is None:
            return
        revisions = {row[0] for row in con.execute("SELECT version_num FROM alembic_version")}
        if len(revisions) < 2:
            return
        keep = _newest_on_one_line(revisions)
        if keep is None:
            from ...errors import StoreUnreadable  # local: it loads DuckDB, which Dagster's own processes do not need

            raise StoreUnreadable(
                f"the Dagster database {db_path} has {len(revisions)} schema versions on different migration lines "
                f"({', '.join(sorted(revisions))}): run sqlite3 {_quote(db_path)} 'DELETE FROM alembic_version' then "
                f"DAGSTER_HOME={_quote(instance_folder)} dagster instance migrate"
            )
        with con:
            con.execute("DELETE FROM alembic_version WHERE version_num != ?", (keep,))
    finally:
        con.close()
    dropped = ", ".join(sorted(revisions - {keep}))
    print(f"atlasmart: repaired {db_path}: it had {len(revisions)} schema versions on one migration line "
          f"(two first opens at once); kept the newest, {keep}, dropped {dropped}", file=sys.stderr)


def prepare_storage(instance_folder: str) -> None:
    """Repair the schema versions of the SQLite storage in ``instance_folder`` (call under ``storage_lock``)."""
    for name in (RUNS_DB, INDEX_DB, SCHEDULES_DB):
        repair_schema_versions(os.path.join(instance_folder, name), instance_folder)


# Asset events a batch stores in bulk (``_store_asset_events``): the ones a step or a served sync sends by the
# hundred. Every other event of a batch goes through Dagster's own ``store_event``.
_BULK_EVENT_TYPES = frozenset({DagsterEventType.ASSET_MATERIALIZATION, DagsterEventType.ASSET_OBSERVATION})


def _in_bulk(event) -> bool:
    return bool(event.is_dagster_event and event.dagster_event_type in _BULK_EVENT_TYPES and event.dagster_event.asset_key)


class PooledSqliteEventLogStorage(HeldCheckEvaluations, RememberedTables, SqliteEventLogStorage):
    """``SqliteEventLogStorage`` that reuses one engine and its open connection per shard."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        self._engines: OrderedDict[str, db.Engine] = OrderedDict()
        self._engines_pid = os.getpid()
        # While this thread stores a batch: the batch's open connection per
        # shard, each inside one transaction committed when the batch ends.
        self._batch_conns: dict[str, db.Connection] | None = None
        self._batch_thread: int | None = None
        # While a batch is stored: the last event of each (asset key, event type), in the order of
        # their last occurrence, whose asset index row is written when the batch ends.
        self._batch_asset_rows: dict[tuple, tuple] | None = None
        self._init_held()
        self._instance_folder = _instance_folder_of_event_log(base_dir)
        super().__init__(base_dir, inst_data=inst_data)

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: Any) -> "PooledSqliteEventLogStorage":
        return cls(inst_data=inst_data, **config_value)

    def _in_batch(self) -> bool:
        return self._batch_conns is not None and self._batch_thread == threading.get_ident()

    def _store_one(self, event) -> None:
        super().store_event(event)

    def _store_together(self, events) -> None:
        self.store_event_batch(events)

    def store_event(self, event) -> None:
        if self._in_batch() or not self._hold(event):
            super().store_event(event)  # its first connection writes this thread's held evaluations first

    @contextmanager
    def _connect(self, shard: str) -> Iterator[db.Connection]:
        if self._in_batch():
            # Inside store_event_batch, which holds the lock: every write of the
            # batch goes through the shard's one open transaction.
            conn = self._batch_conns.get(shard)
            if conn is None:
                conn = self._engine(shard).connect()
                conn.begin()
                self._batch_conns[shard] = conn
            yield conn
            return
        self._write_held()  # a read (or write) of this thread sees what it stored
        with self._db_lock:
            engine = self._engine(shard)
            with engine.connect() as conn:
                with conn.begin():
                    yield conn
                if shard != INDEX_SHARD_NAME:
                    # Write the log into the shard's file now: Dagster's run
                    # watchers wait for that file to change.
                    conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    def store_event_batch(self, events) -> None:
        """Store the events in one transaction per shard (the run's and the index), not one per event."""
        if len(events) < 2:
            super().store_event_batch(events)
            return
        with self._db_lock:
            self._batch_conns, self._batch_thread = {}, threading.get_ident()
            self._batch_asset_rows = {}
            conns = self._batch_conns
            try:
                for bulk, group in groupby(events, key=_in_bulk):
                    if bulk:
                        self._store_asset_events(list(group))
                    else:
                        for event in group:
                            self.store_event(event)
                rows, self._batch_asset_rows = self._batch_asset_rows, None
                if rows:
                    with self.index_connection() as conn:
                        for event, event_id in rows.values():
                            super()._store_asset_event(conn, event, event_id)
            except BaseException:
                for conn in conns.values():
                    conn.rollback()
                raise
            else:
                # The run's shard last: a reader that sees the run's events also
                # finds them in the index.
                for shard in sorted(conns, key=lambda name: name != INDEX_SHARD_NAME):
                    conns[shard].commit()
                    if shard != INDEX_SHARD_NAME:
                        conns[shard].exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
            finally:
                self._batch_conns, self._batch_thread, self._batch_asset_rows = None, None, None
                for conn in conns.values():
                    conn.close()

    def _store_asset_events(self, events: list) -> None:
        """``store_event`` of consecutive materializations or observations, inside a batch, in bulk.

        What Dagster's SQLite ``store_event`` writes for each asset event, in
        the same order: the row in its run's shard, the same row mirrored in
        the index shard (whose id the tags and the asset row name), the
        event's indexed tags and its asset row. Each row is serialised once
        and each shard's rows go through one compiled statement, where
        ``store_event`` builds and compiles one statement per row and shard.
        """
        rows = [self._event_to_row(event) for event in events]
        insert = SqlEventLogStorageTable.insert()
        for run_id in dict.fromkeys(event.run_id for event in events):
            with self.run_connection(run_id) as conn:
                conn.execute(insert, [row for row in rows if row["run_id"] == run_id])
        with self.index_connection() as conn:
            ids = [conn.execute(insert, row).inserted_primary_key[0] for row in rows]
            self._store_asset_event_tags(conn, events, ids)
            for event, event_id in zip(events, ids):
                self._store_asset_event(conn, event, event_id)

    def _store_asset_event(self, conn: db.Connection, event, event_id: int) -> None:
        """The asset index row: written at once, or, inside a batch, once per key and event type when it ends."""
        rows = self._batch_asset_rows
        if rows is None or self._batch_thread != threading.get_ident() or event.dagster_event is None:
            super()._store_asset_event(conn, event, event_id)
            return
        key = (event.dagster_event.asset_key, event.dagster_event_type)
        rows.pop(key, None)  # re-inserted: the order is that of each key's last occurrence
        rows[key] = (event, event_id)

    def _engine(self, shard: str) -> db.Engine:
        """The shard's open engine (created, and the shard initialised, on first use or when its file is gone)."""
        if self._engines_pid != os.getpid():
            # A forked child: its parent's connections are not its own to use or close.
            self._engines = OrderedDict()
            self._engines_pid = os.getpid()
            self._initialized_dbs = set()
            self._forget_held()
        engine = self._engines.get(shard)
        if engine is not None and not os.path.exists(self.path_for_shard(shard)):
            self._drop(shard)
            self._initialized_dbs.discard(shard)
            engine = None
        if engine is None:
            engine = db.create_engine(
                self.conn_string_for_shard(shard),
                poolclass=QueuePool,
                pool_size=1,
                max_overflow=2,
                connect_args={"timeout": _BUSY_TIMEOUT_SECONDS},
            )
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            self._engines[shard] = engine
            while len(self._engines) > _OPEN_SHARDS:
                self._drop(next(iter(self._engines)))
        else:
            self._engines.move_to_end(shard)
        return engine

    def _initdb(self, engine: db.Engine, for_index_shard: bool = False) -> None:
        """Dagster's creation and stamp of a shard, under the storage lock (a doubled version repaired first)."""
        with storage_lock(self._instance_folder):
            path = engine.url.database
            if path:
                repair_schema_versions(path, self._instance_folder)
            super()._initdb(engine, for_index_shard=for_index_shard)

    def _drop(self, shard: str) -> None:
        engine = self._engines.pop(shard, None)
        if engine is not None:
            engine.dispose()

    def _drop_all(self) -> None:
        for shard in list(self._engines):
            self._drop(shard)

    def wipe(self) -> None:
        with self._db_lock:
            self._drop_all()
        super().wipe()

    def upgrade(self) -> None:
        with self._db_lock:
            self._drop_all()
        super().upgrade()

    def dispose(self) -> None:
        with self._db_lock:
            self._drop_all()
        super().dispose()


class PooledSqliteStorage(DagsterSqliteStorage):
    """Dagster's SQLite storage (runs, event log, schedules in ``base_dir``) with the pooled event log."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        # DagsterSqliteStorage.__init__ would open a second, unpooled event
        # log on the same folder; build the same three storages here instead.
        # Under the storage lock: another process opening the folder for the
        # first time waits until the databases are created and stamped.
        self.base_dir = base_dir
        with storage_lock(base_dir):
            prepare_storage(base_dir)
            self._run_storage = SqliteRunStorage.from_local(os.path.join(base_dir, "history", ""))
            self._event_log_storage = PooledSqliteEventLogStorage(os.path.join(base_dir, "history", "runs", ""))
            self._schedule_storage = SqliteScheduleStorage.from_local(os.path.join(base_dir, "schedules"))
        self._inst_data = inst_data
        super(DagsterSqliteStorage, self).__init__()

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: Any) -> "PooledSqliteStorage":
        mkdir_p(config_value["base_dir"])
        return cls(config_value["base_dir"], inst_data=inst_data)

    @property
    def event_storage_data(self) -> ConfigurableClassData | None:
        return ConfigurableClassData(
            __name__, PooledSqliteEventLogStorage.__name__,
            f"base_dir: {os.path.join(self.base_dir, 'history', 'runs', '')}\n",
        )
