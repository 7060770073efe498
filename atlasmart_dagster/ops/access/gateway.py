"""The query gateway: consumer SQL runs where only the granted data exists.

For each query the gateway opens a fresh in-memory DuckDB with external
access disabled (no files, no network, no extensions, no ATTACH of a file,
no COPY), registers exactly the relations the principal's role is granted
(certified versions for consumer grants, only the granted columns), locks the
configuration so no SET or PRAGMA can undo any of that, and accepts a single
SELECT statement (classified by DuckDB's own parser, not by string matching).
A denied relation is not hidden behind a check that a clever query could get
around: it is simply not there.

Every attempt is logged in the ledger with principal, role, decision and a
hash of the statement (statements can hold PII literals, so the text itself
is not stored). Error texts name no relation, column, file or value the
principal may not see.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pyarrow as pa

from ...product.serving import read_certified
from ...store.platform import Platform
from ...store.tables import TABLES_BY_NAME
from .access_log import log_decision
from .policy import CERTIFIED, ROLES, AccessDenied, Principal, principal_for

GATEWAY_CONFIG = {
    "enable_external_access": "false",
    "autoinstall_known_extensions": "false",
    "autoload_known_extensions": "false",
}


# Binder messages that mean "no such column/table here": for a role, an ungranted
# column does not exist, and the gateway does not say whether it exists elsewhere.
_MISSING_NAME = ("not found", "does not have a column", "does not exist")
NO_EXTERNAL_ACCESS = "files, network, extensions and other databases are not reachable through the gateway"


class QueryError(Exception):
    """The query was allowed to run but is not valid (syntax, unknown column)."""


@dataclass
class Gateway:
    platform: Platform

    def _load(self, grant) -> pa.Table:
        spec = TABLES_BY_NAME[grant.relation]
        if grant.version == CERTIFIED:
            table = read_certified(self.platform, grant.relation)
        elif self.platform.warehouse.existing(spec) is None:
            table = spec.arrow_schema().empty_table()
        else:
            table = self.platform.warehouse.read(spec)
        return table.select(list(grant.columns)) if grant.columns else table

    def connection(self, principal: Principal, relations: set[str] | None = None) -> duckdb.DuckDBPyConnection:
        """An isolated engine holding the granted relations (only ``relations`` of them, if given)."""
        con = duckdb.connect(":memory:", config=GATEWAY_CONFIG)
        con.execute("SET TimeZone = 'UTC'")
        for relation, grant in ROLES[principal.role].readable.items():
            if relations is None or relation in relations:
                con.register(relation, self._load(grant))
        con.execute("SET lock_configuration = true")
        return con

    def query(self, who: str, sql: str) -> pa.Table:
        principal = principal_for(who)
        try:
            result = self._run(principal, sql)
        except AccessDenied as exc:
            self._log(principal, sql, "deny", str(exc))
            raise
        except QueryError as exc:
            self._log(principal, sql, "error", str(exc))
            raise
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
            raise QueryError(f"syntax error: {str(exc).splitlines()[0]}") from None
        except duckdb.CatalogException:
            raise AccessDenied(f"the query uses a relation or function that role {role} is not granted") from None
        except duckdb.PermissionException:
            raise AccessDenied(NO_EXTERNAL_ACCESS) from None
        finally:
            parser.close()
        con = self.connection(principal, referenced)
        try:
            return con.sql(sql).to_arrow_table()
        except duckdb.CatalogException:
            raise AccessDenied(f"the query uses a relation or function that role {role} is not granted") from None
        except duckdb.PermissionException:
            raise AccessDenied(NO_EXTERNAL_ACCESS) from None
        except duckdb.InvalidInputException as exc:
            if "configuration has been locked" in str(exc):
                raise AccessDenied("gateway settings cannot be changed") from None
            raise QueryError("invalid input: " + str(exc).splitlines()[0]) from None
        except duckdb.BinderException as exc:
            if any(marker in str(exc) for marker in _MISSING_NAME):
                # e.g. a PII column: for this role it does not exist, and we do not say whether it exists elsewhere
                raise AccessDenied(f"the query uses a column that role {role} is not granted (or that does not exist)") from None
            raise QueryError(str(exc).splitlines()[0]) from None
        finally:
            con.close()

    def _log(self, principal: Principal, sql: str, decision: str, reason: str) -> None:
        log_decision(self.platform, principal, sql, decision, reason)


def _referenced_relations(parser: duckdb.DuckDBPyConnection, sql: str) -> set[str] | None:
    """Relations the statement names, to load only those; None (load every grant) if DuckDB cannot tell."""
    try:
        return {name.split(".")[-1] for name in parser.get_table_names(sql)}
    except (duckdb.BinderException, duckdb.InvalidInputException):
        # naming tables needs binding, which fails without the tables (e.g. JOIN ... USING)
        return None
