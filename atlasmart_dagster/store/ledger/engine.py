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
from typing import Any, Callable, Iterator, Sequence

from ...errors import EnvironmentFault, StoreUnreadable
from ..home import heal_shm, write_fault

# Primary SQLite result codes of a damaged file (extended codes keep them in the low byte).
_DAMAGED = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
# Primary codes of a file the machine will not let SQLite open or write (read-only, full, permissions).
_REFUSED = (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR,
            sqlite3.SQLITE_PERM)


def _code(exc: BaseException) -> int:
    return (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF


@dataclass(frozen=True)
class LedgerTable:
    """One append-only ledger table, declared by the domain store that owns it."""

    name: str
    columns: str  # column definitions, as in CREATE TABLE
    indexes: tuple[str, ...] = ()  # each "name ON table(columns)"

    def objects(self) -> set[str]:
        """Names of the table, its append-only triggers and its indexes in the database."""
        return {self.name, f"{self.name}_no_update", f"{self.name}_no_delete",
                *(index.partition(" ON ")[0].strip() for index in self.indexes)}


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

# The identity of the home whose ledger this is: one row, written when the home
# is first used (or when a home from before identities is adopted). The
# catalog records the same id; ``store/platform.py`` refuses stores that disagree.
HOME_IDENTITY = LedgerTable(
    "home_identity",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        home_id TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        origin TEXT NOT NULL
    """,
)


class LedgerEngine:
    """Append-only SQLite database at ``path``; tables are created the first time a store uses them.

    On a home the machine will not let it write (a read-only file system or
    folder) the database is opened read-only, so commands that only read
    still work; a write then fails with one line naming the file and the
    remedy (``EnvironmentFault``), as does a full disk or a leftover ``-shm``
    or ``-wal`` with the wrong permissions.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._ready: set[str] = set()
        self._local = threading.local()
        self.read_only = False
        # Set by the platform while the home is empty: called before this ledger is first
        # used, to create the home's stores together (store/platform.py).
        self.before_first_use: Callable[[], None] | None = None

    def exists(self) -> bool:
        """Whether the database file is there (nothing is created to find out)."""
        return self.path.is_file()

    def _first_use(self) -> None:
        """Let the platform create an empty home's stores before this ledger is first used."""
        hook = self.before_first_use
        if hook is not None:
            hook()

    # -- connections and transactions ---------------------------------------
    def _open(self) -> sqlite3.Connection:
        """A connection for reading and writing, or a read-only one where the machine allows no write."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        heal_shm(self.path)
        con = None
        try:
            con = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=True)
            con.execute("PRAGMA busy_timeout = 60000")
            con.execute("PRAGMA journal_mode = WAL")
            return con
        except sqlite3.OperationalError as exc:
            if con is not None:
                con.close()
            fault = write_fault(self.path) if _code(exc) in _REFUSED else None
            if fault is None:
                raise
            if fault.reason != "full" and self.path.is_file():
                read_only = self._open_read_only()
                if read_only is not None:
                    return read_only
            raise EnvironmentFault(fault.message) from exc

    def _open_read_only(self) -> sqlite3.Connection | None:
        """The database opened for reading only (None if even that is refused).

        WAL needs its ``-shm`` file: where it exists SQLite reads through it;
        where it cannot be created the file is opened as immutable, which is
        exact only while nobody writes it, and nobody can on a home that
        refuses writes.
        """
        for flags in ("mode=ro", "immutable=1"):
            con = None
            try:
                con = sqlite3.connect(f"{self.path.as_uri()}?{flags}", uri=True, timeout=60, isolation_level=None,
                                      check_same_thread=True)
                con.execute("PRAGMA busy_timeout = 60000")
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.OperationalError:
                if con is not None:
                    con.close()
                continue
            self.read_only = True
            return con
        return None

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection (kept open: a connect per operation costs more than the work).

        A damaged database file raises ``StoreUnreadable`` (a restore cures it, a retry never does);
        a write the machine refuses raises ``EnvironmentFault`` naming the file and the remedy.
        """
        self._first_use()
        try:
            con = getattr(self._local, "con", None)
            if con is None or getattr(self._local, "pid", None) != os.getpid():
                con = self._open()
                con.row_factory = sqlite3.Row
                self._local.con, self._local.pid = con, os.getpid()
            yield con
        except sqlite3.DatabaseError as exc:
            code = _code(exc)
            if code in _DAMAGED:
                raise StoreUnreadable(
                    f"the ledger at {self.path} is not a readable SQLite database ({exc}): "
                    "restore the home from a backup (atlasmart restore BACKUP)"
                ) from exc
            fault = write_fault(self.path) if code in _REFUSED else None
            if fault is None:
                raise
            raise EnvironmentFault(fault.message) from exc

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group appends into one transaction (one fsync instead of one per row); nests."""
        self._writable()
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

    def _writable(self) -> None:
        """Refuse a write in one line when the database had to be opened read-only."""
        with self.connect():
            pass
        if self.read_only:
            fault = write_fault(self.path)
            raise EnvironmentFault(fault.message if fault else f"cannot write {self.path}: it could be opened only "
                                   f"for reading")

    # -- tables ------------------------------------------------------------------
    def table_names(self) -> set[str]:
        """Names of the ledger's tables (an absent database has none; nothing is created)."""
        if not self.exists():
            return set()
        with self.connect() as con:
            rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {r[0] for r in rows if not r[0].startswith("sqlite_")}

    def has_rows(self, names: set[str]) -> bool:
        """Whether any of the tables ``names`` holds a row."""
        with self.connect() as con:
            return any(con.execute(f'SELECT EXISTS (SELECT 1 FROM "{name}")').fetchone()[0] for name in sorted(names))

    def _present(self, con: sqlite3.Connection, table: LedgerTable) -> bool:
        """Whether the table, its triggers and its indexes all exist already (then nothing needs writing)."""
        wanted = table.objects()
        marks = ", ".join("?" for _ in wanted)
        (found,) = con.execute(f"SELECT count(*) FROM sqlite_master WHERE name IN ({marks})", tuple(wanted)).fetchone()
        return found == len(wanted)

    def ensure(self, table: LedgerTable) -> bool:
        """Create ``table``, its append-only triggers and its indexes, once per process; False if it cannot exist.

        A table that is complete already costs one read, no write transaction
        (so a read-only home can be read). On this thread's connection: inside
        an open transaction the DDL joins it (SQLite DDL is transactional), so
        a first append never waits on itself. On a read-only database a table
        that was never created does not exist (False): reads find no rows.
        """
        if table.name in self._ready:
            return True
        with self.connect() as con:
            if self._present(con, table):
                self._ready.add(table.name)
                return True
            if self.read_only:
                return False
            if con.in_transaction:
                self._create(con, table)
                self._local.created.add(table.name)
                return True
            try:
                con.execute("BEGIN IMMEDIATE")
                try:
                    self._create(con, table)
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
                con.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if _code(exc) != sqlite3.SQLITE_READONLY:
                    raise
                # SQLite opened the file read-only by itself (it, or its -wal, has no write permission):
                # a table never created has no rows to read; a write is refused by _writable.
                self.read_only = True
                return False
            self._ready.add(table.name)
        return True

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
        self._writable()
        if not self.ensure(table):
            self._writable()  # found read-only only now
        columns = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        verb = "INSERT OR IGNORE" if ignore_duplicate else "INSERT"
        with self.connect() as con:
            cursor = con.execute(f"{verb} INTO {table.name} ({columns}) VALUES ({marks})", tuple(values.values()))
            return cursor.lastrowid

    def select(
        self, table: LedgerTable, where: str = "", args: Sequence[Any] = (), order_by: str = "rowid",
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Rows of ``table`` as dicts (``where`` is a trusted SQL predicate written by the owning store)."""
        if not self.ensure(table):
            return []
        clause = f" WHERE {where}" if where else ""
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        with self.connect() as con:
            rows = con.execute(f"SELECT * FROM {table.name}{clause} ORDER BY {order_by}{tail}", tuple(args)).fetchall()
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
