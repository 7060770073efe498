"""Dagster's Postgres storage with a step's check evaluations written in one transaction: the team instance's storage.

Dagster's ``PostgresEventLogStorage`` opens a new connection (``NullPool``)
and commits for every statement group it writes: a check evaluation costs a
connection and three commits, about 35 ms, and a 30-day range of the daily
chain reports 360 of them. Its ``store_event_batch`` takes materializations
and observations only.

``BatchingPostgresEventLogStorage`` is Dagster's storage with two changes:

* the check evaluations a step holds (``held_check_evaluations.py``) are
  written on one connection in one transaction, each through Dagster's own
  ``store_event`` (the same rows; a failure rolls all of them back and they
  are stored one by one);
* whether the asset-check tables exist is asked once per process, not once
  per stored evaluation (Dagster's migrations add tables and never drop one).

Everything else is Dagster's: the same tables, the same engine settings.
``BatchingPostgresStorage`` is ``DagsterPostgresStorage`` (``storage:
postgres``) with this event log; the team instance's ``dagster.yaml`` selects it
as ``storage: custom`` with the same ``postgres_url``.
``atlasmart_dagster_tests/store/test_dagster_postgres_adapter.py`` runs it on a
real PostgreSQL and fails on an upgrade that changes what it relies on.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from dagster._core.storage.config import pg_config
from dagster._serdes import ConfigurableClassData
from dagster_postgres.event_log import PostgresEventLogStorage
from dagster_postgres.run_storage import PostgresRunStorage
from dagster_postgres.schedule_storage import PostgresScheduleStorage
from dagster_postgres.storage import DagsterPostgresStorage
from dagster_postgres.utils import get_token_provider_from_config, pg_url_from_config

from .held_check_evaluations import HeldCheckEvaluations
from .remembered_tables import RememberedTables

_MODULE = __name__


def _storage_arguments(config_value) -> dict:
    """A ``storage: postgres`` config (Dagster's ``pg_config``) as the constructor's arguments, as Dagster reads it."""
    return {"postgres_url": pg_url_from_config(config_value),
            "should_autocreate_tables": config_value.get("should_autocreate_tables", True),
            "token_provider": get_token_provider_from_config(config_value)}


class BatchingPostgresEventLogStorage(HeldCheckEvaluations, RememberedTables, PostgresEventLogStorage):
    """``PostgresEventLogStorage`` that writes a step's held check evaluations in one transaction."""

    def __init__(self, postgres_url: str, should_autocreate_tables: bool = True,
                 inst_data: ConfigurableClassData | None = None, token_provider=None):
        self._init_held()
        # The connection of the transaction this thread is writing held evaluations through.
        self._batch_conns: dict[int, object] = {}
        super().__init__(postgres_url, should_autocreate_tables, inst_data=inst_data, token_provider=token_provider)

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> "BatchingPostgresEventLogStorage":
        return cls(inst_data=inst_data, **_storage_arguments(config_value))

    @contextmanager
    def _connect(self) -> Iterator:
        conn = self._batch_conns.get(threading.get_ident())
        if conn is not None:
            yield conn
            return
        self._write_held()  # a read (or write) of this thread sees what it stored
        with super()._connect() as conn:
            yield conn

    def _store_one(self, event) -> None:
        PostgresEventLogStorage.store_event(self, event)

    def _store_together(self, events) -> None:
        thread = threading.get_ident()
        with super()._connect() as conn:
            conn = conn.execution_options(isolation_level="READ COMMITTED")  # the engine autocommits
            with conn.begin():
                self._batch_conns[thread] = conn
                try:
                    for event in events:
                        PostgresEventLogStorage.store_event(self, event)
                finally:
                    del self._batch_conns[thread]

    def store_event(self, event) -> None:
        if threading.get_ident() in self._batch_conns or not self._hold(event):
            super().store_event(event)  # its first connection writes this thread's held evaluations first


class BatchingPostgresStorage(DagsterPostgresStorage):
    """``DagsterPostgresStorage`` (``storage: postgres``) with ``BatchingPostgresEventLogStorage``."""

    def __init__(self, postgres_url: str, should_autocreate_tables: bool = True,
                 inst_data: ConfigurableClassData | None = None, token_provider=None):
        # DagsterPostgresStorage.__init__ would build Dagster's event log as well; build the three here.
        self.postgres_url = postgres_url
        self.should_autocreate_tables = should_autocreate_tables
        self._inst_data = inst_data
        self._run_storage = PostgresRunStorage(postgres_url, should_autocreate_tables, token_provider=token_provider)
        self._event_log_storage = BatchingPostgresEventLogStorage(
            postgres_url, should_autocreate_tables, token_provider=token_provider
        )
        self._schedule_storage = PostgresScheduleStorage(
            postgres_url, should_autocreate_tables, token_provider=token_provider
        )
        super(DagsterPostgresStorage, self).__init__()

    @classmethod
    def config_type(cls):
        return pg_config()

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> "BatchingPostgresStorage":
        return cls(inst_data=inst_data, **_storage_arguments(config_value))

    @property
    def event_storage_data(self) -> ConfigurableClassData | None:
        # What a process started from this instance's ref builds: this event log, not Dagster's.
        return (ConfigurableClassData(_MODULE, BatchingPostgresEventLogStorage.__name__, self.inst_data.config_yaml)
                if self.inst_data else None)
