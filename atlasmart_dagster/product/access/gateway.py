"""The query gateway: consumer SQL runs where only the granted data exists.

For each query the gateway opens a fresh in-memory DuckDB with external
access disabled (no files, no network, no extensions, no ATTACH of a file,
no COPY, no spilling to disk), registers exactly the relations the
principal's role is granted (certified versions unless the policy says
published, only the granted columns), sets the query's memory limit, locks
the configuration so no SET or PRAGMA can undo any of that, and accepts a
single SELECT statement (classified by DuckDB's own parser, not by string
matching). A denied relation is not hidden behind a check that a clever query
could get around: it is simply not there. Relation names resolve as in any
DuckDB session: case-insensitively, bare or qualified (``main.x``,
``memory.main.x``).

A query runs under a time limit and a memory limit (``QueryLimits``) that hold
for every query shape: the engine runs in a child process forked for the
query, limited by the operating system to the memory limit plus a measured
headroom and killed at the time limit, in addition to DuckDB's own
``memory_limit``; the result handed back counts against the memory limit too
(see ``engine_process``). The parent loads the granted relations and the
child registers exactly those, so the child sees what the role may see and
nothing else.

Every attempt is logged in the ledger with principal, role, decision and a
hash of the statement (statements can hold PII literals, so the text itself
is not stored, and an error is logged by its kind, never by DuckDB's text,
which can echo literals). Every failure reaches the caller as one line,
``AccessDenied`` or ``QueryError``, naming no relation, column, file or value
the principal may not see.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

import duckdb
import pyarrow as pa

from ...errors import UsageError
from ...settings import (
    DEFAULT_QUERY_MEMORY,
    DEFAULT_QUERY_TIMEOUT_S,
    MAX_QUERY_TIMEOUT_S,
    SettingError,
    Settings,
    memory_size,
    query_timeout,
)
from ..serving import read_certified, read_certified_through
from ...store.platform import Platform
from ...store.tables import TABLES_BY_NAME
from .access_log import log_decision
from .engine_process import EngineFailed, EngineOverMemory, EngineTimedOut, run_in_child
from .policy import CERTIFIED, ROLES, AccessDenied, Principal, principal_for

GATEWAY_CONFIG = {
    "enable_external_access": "false",
    "autoinstall_known_extensions": "false",
    "autoload_known_extensions": "false",
    # No spilling: the memory limit is a hard limit, and a query writes nothing to disk.
    "temp_directory": "",
}

# The limits' forms are the settings' (atlasmart_dagster/settings.py): --timeout and --memory take the same.
DEFAULT_TIMEOUT_S = DEFAULT_QUERY_TIMEOUT_S
MAX_TIMEOUT_S = MAX_QUERY_TIMEOUT_S
DEFAULT_MEMORY = DEFAULT_QUERY_MEMORY
TIMEOUT_ENV = Settings.query_timeout_s.name
MEMORY_ENV = Settings.query_memory.name
RESULT_BATCH_ROWS = 65_536


# Binder messages that mean "no such column/table here": for a role, an ungranted
# column does not exist, and the gateway does not say whether it exists elsewhere.
_MISSING_NAME = ("not found", "does not have a column", "does not exist")
NO_EXTERNAL_ACCESS = "files, network, extensions and other databases are not reachable through the gateway"


class QueryError(Exception):
    """The query was allowed but did not run to the end; ``str()`` is for the user, ``reason`` for the log."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason  # the kind of error only: never the statement's text or values


@dataclass(frozen=True)
class QueryLimits:
    """The time and memory one gateway query may use; a value out of range is a ``UsageError``."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    memory: str = DEFAULT_MEMORY  # as DuckDB writes sizes: 512MB, 1GB, 2GiB

    def __post_init__(self):
        _check_timeout(self.timeout_s, "the query time limit")
        _size_in_bytes(self.memory, "the query memory limit")

    @property
    def memory_bytes(self) -> int:
        return _size_in_bytes(self.memory, "the query memory limit")

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "QueryLimits":
        """Limits from ``ATLASMART_QUERY_TIMEOUT_S`` and ``ATLASMART_QUERY_MEMORY``, else the defaults."""
        return cls.from_settings(environ)

    @classmethod
    def from_settings(cls, environ: Mapping[str, str], timeout_s: float | None = None,
                      memory: str | None = None) -> "QueryLimits":
        """The command line's ``--timeout``/``--memory`` where given, else the environment's, else the defaults.

        A bad value is a ``UsageError`` naming where it came from and the forms accepted.
        """
        given = Settings.from_environ(environ)
        if timeout_s is None:
            timeout_s = given.query_timeout_s
        else:
            _check_timeout(timeout_s, "--timeout")
        if memory is None:
            memory = given.query_memory
        else:
            _size_in_bytes(memory, "--memory")
        return cls(timeout_s=timeout_s, memory=memory)


def _check_timeout(seconds: float, source: str) -> None:
    try:
        query_timeout(seconds, source)
    except SettingError as exc:
        raise UsageError(str(exc)) from None


def _size_in_bytes(size: str, source: str) -> int:
    try:
        return memory_size(size, source)
    except SettingError as exc:
        raise UsageError(str(exc)) from None


@dataclass
class Gateway:
    platform: Platform
    limits: QueryLimits = field(default_factory=lambda: QueryLimits.from_env(os.environ))

    def _load(self, grant) -> pa.Table:
        spec = TABLES_BY_NAME[grant.relation]
        if grant.version == CERTIFIED and grant.through:
            table = read_certified_through(self.platform, grant.relation, grant.through)
        elif grant.version == CERTIFIED:
            table = read_certified(self.platform, grant.relation)
        elif self.platform.warehouse.existing(spec) is None:
            table = spec.arrow_schema().empty_table()
        else:
            table = self.platform.warehouse.read(spec)
        return table.select(list(grant.columns)) if grant.columns else table

    def _granted(self, principal: Principal, relations: set[str] | None) -> dict[str, pa.Table]:
        """The relations the principal's role is granted (only ``relations`` of them, if given), as it may see them."""
        return {relation: self._load(grant) for relation, grant in ROLES[principal.role].readable.items()
                if relations is None or relation in relations}

    def _engine(self, tables: dict[str, pa.Table]) -> duckdb.DuckDBPyConnection:
        """An isolated engine holding exactly ``tables``, its configuration locked (built in the query's process)."""
        con = duckdb.connect(":memory:", config={**GATEWAY_CONFIG, "memory_limit": f"{self.limits.memory_bytes}B"})
        con.execute("SET TimeZone = 'UTC'")
        for relation, table in tables.items():
            con.register(relation, table)
            # Registered data lives in the temp catalog; a view in the session's own
            # database lets memory.main.<name> resolve too, as in any DuckDB session.
            con.execute(f'CREATE VIEW memory.main."{relation}" AS SELECT * FROM temp.main."{relation}"')
        con.execute("SET lock_configuration = true")
        return con

    def query(self, who: str, sql: str) -> pa.Table:
        """Run one SELECT as ``who`` (a principal or role); every outcome is logged."""
        principal = principal_for(who)
        try:
            result = self._run(principal, sql)
        except AccessDenied as exc:
            self._log(principal, sql, "deny", str(exc))
            raise
        except QueryError as exc:
            self._log(principal, sql, "error", exc.reason)
            raise
        except Exception as exc:
            # Unforeseen: the user gets one line, the log the error's class; its text
            # (which may hold paths or values) goes to neither.
            error = QueryError("the query failed with an internal error; it is logged for the platform team",
                               f"internal error ({type(exc).__name__})")
            self._log(principal, sql, "error", error.reason)
            raise error from None
        self._log(principal, sql, "allow", f"{result.num_rows} rows")
        return result

    def _run(self, principal: Principal, sql: str) -> pa.Table:
        role = principal.role
        # Even parsing happens in a locked-down engine: naming a table function can
        # make an ordinary DuckDB connection try to install an extension.
        parser = duckdb.connect(":memory:", config=GATEWAY_CONFIG)
        try:
            statements = parser.extract_statements(sql)
            if len(statements) != 1:
                raise AccessDenied(f"one SELECT statement per query (got {len(statements)})")
            if statements[0].type != duckdb.StatementType.SELECT:
                raise AccessDenied(f"only SELECT is allowed through the gateway (got {statements[0].type.name})")
            referenced = _referenced_relations(parser, sql)
        except duckdb.ParserException as exc:
            raise QueryError(f"syntax error: {_first_line(exc)}", "syntax error") from None
        except duckdb.CatalogException:
            raise AccessDenied(f"the query uses a relation or function that role {role} is not granted") from None
        except duckdb.PermissionException:
            raise AccessDenied(NO_EXTERNAL_ACCESS) from None
        finally:
            parser.close()
        try:
            tables = self._granted(principal, referenced)
        except Exception as exc:
            # e.g. a certified file is missing: the exception names warehouse paths
            raise QueryError("the data for this query could not be read; the failure is logged for the platform team",
                             f"storage error ({type(exc).__name__})") from None
        try:
            return run_in_child(lambda: self._engine(tables), sql, memory_bytes=self.limits.memory_bytes,
                                timeout_s=self.limits.timeout_s, batch_rows=RESULT_BATCH_ROWS)
        except EngineTimedOut:
            raise QueryError(f"the query exceeded the time limit of {self.limits.timeout_s:g} s and was stopped",
                             "time limit exceeded") from None
        except EngineOverMemory:
            raise self._over_memory() from None
        except EngineFailed as exc:
            if exc.signal:
                raise QueryError(f"the query stopped the engine ({exc.signal}), most likely at the memory limit of "
                                 f"{self.limits.memory}; it is logged for the platform team",
                                 f"engine crashed ({exc.signal})") from None
            raise QueryError("the query failed with an internal error; it is logged for the platform team",
                             f"internal error ({exc})") from None
        except duckdb.CatalogException:
            raise AccessDenied(f"the query uses a relation or function that role {role} is not granted") from None
        except duckdb.PermissionException:
            raise AccessDenied(NO_EXTERNAL_ACCESS) from None
        except duckdb.InvalidInputException as exc:
            if "configuration has been locked" in str(exc):
                raise AccessDenied("gateway settings cannot be changed") from None
            raise QueryError("invalid input: " + _first_line(exc), "invalid input") from None
        except duckdb.BinderException as exc:
            if any(marker in str(exc) for marker in _MISSING_NAME):
                # e.g. a PII column: for this role it does not exist, and we do not say whether it exists elsewhere
                raise AccessDenied(f"the query uses a column that role {role} is not granted (or that does not exist)") from None
            raise QueryError(_first_line(exc), "binder error") from None
        except (duckdb.DataError, duckdb.ProgrammingError, duckdb.NotSupportedError) as exc:
            # Errors in the query or the values it computes (bad cast, date, overflow): the
            # engine holds only granted, in-memory data, so DuckDB's text names nothing else.
            raise QueryError(_first_line(exc), f"query error ({type(exc).__name__})") from None

    def _over_memory(self) -> QueryError:
        return QueryError(f"the query exceeded the memory limit of {self.limits.memory} and was stopped",
                          "memory limit exceeded")

    def _log(self, principal: Principal, sql: str, decision: str, reason: str) -> None:
        log_decision(self.platform, principal, sql, decision, reason)


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _referenced_relations(parser: duckdb.DuckDBPyConnection, sql: str) -> set[str] | None:
    """Relations the statement names, to load only those; None (load every grant) if DuckDB cannot tell.

    Names compare as SQL compares them: case-insensitively, whatever they are qualified with.
    """
    try:
        return {name.split(".")[-1].lower() for name in parser.get_table_names(sql)}
    except (duckdb.BinderException, duckdb.InvalidInputException):
        # naming tables needs binding, which fails without the tables (e.g. JOIN ... USING)
        return None
