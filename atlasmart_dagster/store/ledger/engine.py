"""The ledger engine: one append-only SQLite database that every domain store writes through.

Dagster's event log knows runs and materializations; it does not know which
version of a partition consumers may read, why a run was blocked, or what an
operator decided. The ledger does. It is a SQLite database in the home folder
(WAL mode, so Dagster runs, sensors and operators can write at once) whose
tables can only grow: triggers refuse every UPDATE and DELETE. State is
always *derived* from the events, so history is never lost and a withdrawal
is an event, not an edit.

The engine knows no domain. Each domain store (partition states, batches,
checks, holds, SLOs, backfills, run records, incidents, contract approvals,
dashboard deployments, the access log) declares its own ``LedgerTable`` and
reads and writes it through ``append`` and ``select`` with that declaration,
never by a table name typed elsewhere.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from ...errors import StoreUnreadable

# Primary SQLite result codes of a damaged file (extended codes keep them in the low byte).
_DAMAGED = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


@dataclass(frozen=True)
class LedgerTable:
    """One append-only ledger table, declared by the domain store that owns it."""

    name: str
    columns: str  # column definitions, as in CREATE TABLE
    indexes: tuple[str, ...] = ()  # each "name ON table(columns)"


def dumps(value: Any) -> str | None:
    """JSON for a ledger column (sorted keys, so equal values give equal text)."""
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def loads(text: str | None, default: Any = None) -> Any:
    return default if text is None else json.loads(text)


ID_ALLOCATIONS = LedgerTable(
    "id_allocations",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        number INTEGER NOT NULL,
        UNIQUE (kind, number)
    """,
)


class LedgerEngine:
    """Append-only SQLite database at ``path``; tables are created the first time a store uses them."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._ready: set[str] = set()
        self._local = threading.local()

    # -- connections and transactions ---------------------------------------
    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection (kept open: a connect per operation costs more than the work).

        A damaged database file raises ``StoreUnreadable`` (a restore cures it, a retry never does).
        """
        try:
            con = getattr(self._local, "con", None)
            if con is None or getattr(self._local, "pid", None) != os.getpid():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                con = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=True)
                con.row_factory = sqlite3.Row
                con.execute("PRAGMA busy_timeout = 60000")
                con.execute("PRAGMA journal_mode = WAL")
                self._local.con, self._local.pid = con, os.getpid()
            yield con
        except sqlite3.DatabaseError as exc:
            if (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF not in _DAMAGED:
                raise
            raise StoreUnreadable(
                f"the ledger at {self.path} is not a readable SQLite database ({exc}): "
                "restore the home from a backup (atlasmart restore BACKUP)"
            ) from exc

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group appends into one transaction (one fsync instead of one per row); nests."""
        with self.connect() as con:
            if con.in_transaction:
                yield
                return
            con.execute("BEGIN IMMEDIATE")
            self._local.created = set()
            try:
                yield
            except BaseException:
                con.execute("ROLLBACK")  # tables first created inside it are gone again
                raise
            con.execute("COMMIT")
            self._ready |= self._local.created

    # -- tables ------------------------------------------------------------------
    def ensure(self, table: LedgerTable) -> None:
        """Create ``table``, its append-only triggers and its indexes, once per process.

        On this thread's connection: inside an open transaction the DDL joins it
        (SQLite DDL is transactional), so a first append never waits on itself.
        """
        if table.name in self._ready:
            return
        with self.connect() as con:
            if con.in_transaction:
                self._create(con, table)
                self._local.created.add(table.name)
                return
            con.execute("BEGIN IMMEDIATE")
            try:
                self._create(con, table)
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
            self._ready.add(table.name)

    @staticmethod
    def _create(con: sqlite3.Connection, table: LedgerTable) -> None:
        con.execute(f"CREATE TABLE IF NOT EXISTS {table.name} ({table.columns})")
        for op in ("UPDATE", "DELETE"):
            con.execute(
                f"CREATE TRIGGER IF NOT EXISTS {table.name}_no_{op.lower()} BEFORE {op} ON {table.name} "
                f"BEGIN SELECT RAISE(ABORT, 'the AtlasMart ledger is append-only'); END"
            )
        for index in table.indexes:
            con.execute(f"CREATE INDEX IF NOT EXISTS {index}")

    def append(self, table: LedgerTable, values: dict[str, Any], ignore_duplicate: bool = False) -> int:
        """Append one row; returns its rowid (``ignore_duplicate``: a row with the same key adds nothing)."""
        self.ensure(table)
        columns = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        verb = "INSERT OR IGNORE" if ignore_duplicate else "INSERT"
        with self.connect() as con:
            cursor = con.execute(f"{verb} INTO {table.name} ({columns}) VALUES ({marks})", tuple(values.values()))
            return cursor.lastrowid

    def select(
        self, table: LedgerTable, where: str = "", args: Sequence[Any] = (), order_by: str = "rowid"
    ) -> list[dict[str, Any]]:
        """Rows of ``table`` as dicts (``where`` is a trusted SQL predicate written by the owning store)."""
        self.ensure(table)
        clause = f" WHERE {where}" if where else ""
        with self.connect() as con:
            rows = con.execute(f"SELECT * FROM {table.name}{clause} ORDER BY {order_by}", tuple(args)).fetchall()
        return [dict(r) for r in rows]

    def allocate_id(self, kind: str) -> str:
        """The next readable id of a kind (``BF-0001``, ``INC-0001``), unique under concurrency."""
        self.ensure(ID_ALLOCATIONS)
        with self.transaction(), self.connect() as con:
            (last,) = con.execute(
                "SELECT coalesce(max(number), 0) FROM id_allocations WHERE kind = ?", (kind,)
            ).fetchone()
            con.execute("INSERT INTO id_allocations (kind, number) VALUES (?, ?)", (kind, last + 1))
        return f"{kind}-{last + 1:04d}"


def where_clause(equal: dict[str, Any], within: dict[str, Any] | None = None) -> tuple[str, list[Any]]:
    """A predicate from ``column = value`` (None skipped) and ``column IN values`` (None skipped) filters."""
    clauses, args = [], []
    for column, value in equal.items():
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    for column, values in (within or {}).items():
        if values is not None:
            values = list(values)
            if not values:
                # An empty list matches nothing. SQLite accepts ``IN ()``; Postgres
                # refuses it as a syntax error, so it is never written.
                clauses.append("1 = 0")
                continue
            clauses.append(f"{column} IN ({', '.join('?' for _ in values)})")
            args.extend(values)
    return " AND ".join(clauses), args
