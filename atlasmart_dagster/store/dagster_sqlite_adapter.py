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
then falls back to storing the events one by one).

``PooledSqliteStorage`` is ``DagsterSqliteStorage`` (the ``storage: sqlite``
default, same folders under ``base_dir``) with this event log; the embedded
``dagster.yaml`` selects it as ``storage: custom``. This is the one place
AtlasMart subclasses Dagster's storage internals;
``atlasmart_dagster_tests/store/test_dagster_sqlite_adapter.py`` pins what it
relies on (the ``_connect(shard)`` hook, the folder layout, watchers seeing
its writes) and fails on an upgrade that changes it.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Iterator

import sqlalchemy as db
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage
from dagster._serdes import ConfigurableClassData
from dagster._utils import mkdir_p
from sqlalchemy.pool import QueuePool

# Dagster's own busy timeout for its SQLite shards (seconds).
_BUSY_TIMEOUT_SECONDS = 15
# Engines kept open: the index plus the run shards a process is writing or
# reading now (a range run writes one; the webserver reads a few).
_OPEN_SHARDS = 6


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` that reuses one engine and its open connection per shard."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        self._engines: OrderedDict[str, db.Engine] = OrderedDict()
        self._engines_pid = os.getpid()
        self._tables_seen: set[str] = set()
        # While this thread stores a batch: the batch's open connection per
        # shard, each inside one transaction committed when the batch ends.
        self._batch_conns: dict[str, db.Connection] | None = None
        self._batch_thread: int | None = None
        super().__init__(base_dir, inst_data=inst_data)

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: Any) -> "PooledSqliteEventLogStorage":
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[db.Connection]:
        if self._batch_conns is not None and self._batch_thread == threading.get_ident():
            # Inside store_event_batch, which holds the lock: every write of the
            # batch goes through the shard's one open transaction.
            conn = self._batch_conns.get(shard)
            if conn is None:
                conn = self._engine(shard).connect()
                conn.begin()
                self._batch_conns[shard] = conn
            yield conn
            return
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
            conns = self._batch_conns
            try:
                for event in events:
                    self.store_event(event)
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
                self._batch_conns, self._batch_thread = None, None
                for conn in conns.values():
                    conn.close()

    def _engine(self, shard: str) -> db.Engine:
        """The shard's open engine (created, and the shard initialised, on first use or when its file is gone)."""
        if self._engines_pid != os.getpid():
            # A forked child: its parent's connections are not its own to use or close.
            self._engines = OrderedDict()
            self._engines_pid = os.getpid()
            self._initialized_dbs = set()
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

    def _drop(self, shard: str) -> None:
        engine = self._engines.pop(shard, None)
        if engine is not None:
            engine.dispose()

    def _drop_all(self) -> None:
        for shard in list(self._engines):
            self._drop(shard)

    def has_table(self, table_name: str) -> bool:
        """Dagster asks this for every check evaluation it stores (with a new engine each time).

        A table that exists is remembered: Dagster's migrations add tables and never drop one.
        """
        if table_name in self._tables_seen:
            return True
        found = super().has_table(table_name)
        if found:
            self._tables_seen.add(table_name)
        return found

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
        self.base_dir = base_dir
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
