"""Error classes that say whether a failure is worth retrying.

Every failure in AtlasMart is one of two kinds:

* **transient**: the storage layer was busy or flaky (an Iceberg commit lost a
  race, SQLite was locked, an I/O call failed). Running the same step again
  with the same inputs can succeed, so the step's ``RetryPolicy`` retries it.
* **permanent**: the input or the code is wrong (source not ready, a lying
  manifest, a contract violation, bad data, raw evidence conflict). Retrying
  cannot help and only delays the page, so the step fails at once with
  ``Failure(allow_retries=False)``.

Anything we cannot classify is treated as permanent: retrying an unknown bug
hides it and can multiply its damage.
"""

from __future__ import annotations

import sqlite3

import duckdb
from pyiceberg.exceptions import CommitFailedException


class AtlasmartError(Exception):
    """Base class for errors raised on purpose by AtlasMart."""


class TransientError(AtlasmartError):
    """A failure that a retry with the same inputs can cure."""


class InjectedTransientError(TransientError):
    """A transient failure injected on purpose by a drill or a test."""


class PermanentError(AtlasmartError):
    """A failure that no retry can cure; it needs a person or new input."""

    kind = "permanent"


class SourceNotReady(PermanentError):
    """The landing zone does not (yet) hold a complete, truthful batch.

    ``waiting`` says which: True when nothing complete has arrived yet (no folder, no manifest, a manifest
    not yet ready, a retired batch awaiting its replacement), so the day is *late*; False when a delivery is
    there and was refused (a lying manifest, a bad hash, a malformed file), so the day's source is *wrong*.
    Detection titles the incident by that mechanism.
    """

    kind = "source_not_ready"

    def __init__(self, partition: str, problems: list[str], scope: str | None = None, waiting: bool = False):
        self.partition = partition
        self.problems = list(problems)
        self.waiting = waiting
        super().__init__(f"source not ready for {scope or 'sales_date=' + partition}: " + "; ".join(self.problems))


class ContractViolation(PermanentError):
    """The batch does not conform to its source contract."""

    kind = "contract_violation"


class RawEvidenceConflict(PermanentError):
    """A batch id already in the raw store arrived again with different bytes."""

    kind = "raw_evidence_conflict"


class LaneViolation(PermanentError):
    """A run tried to do work its concurrency lane does not allow."""

    kind = "lane_violation"


class UsageError(PermanentError):
    """The command line or its setting is wrong (an argument, the home, an environment variable).

    The message says what is wrong and what to do; the ``atlasmart`` command
    line prints it as one line and exits 2.
    """

    kind = "usage"


class StoreUnreadable(PermanentError):
    """A store of the home exists but is not readable (a damaged file): it needs a restore, not a retry."""

    kind = "store_unreadable"


class StoreRefused(PermanentError):
    """A store of the home cannot be trusted: it is missing, or it belongs to another home.

    Every store (ledger, catalog, raw store, table files) is checked against
    the others before anything reads or writes it; a lost store is never
    answered as empty nor re-created. The message names the store and says to
    restore it (``atlasmart restore BACKUP``).
    """

    kind = "store_refused"


class StoreMissing(StoreRefused):
    """A store the other stores say exists is gone (a lost ``catalog.db``, ``ledger.db`` or raw store)."""

    kind = "store_missing"


class StoreForeign(StoreRefused):
    """A store carries another home's identity, or names another home's files (it was replaced)."""

    kind = "store_foreign"


class SnapshotMissing(StoreMissing):
    """A version (snapshot) of a table that the ledger names is not in the table: never read as an empty table."""

    kind = "snapshot_missing"


class EnvironmentFault(PermanentError):
    """The machine refused a store's file: a read-only home, a full disk, a file with the wrong permissions.

    The message names the file and the remedy; retrying without a person
    fixing the machine cannot help.
    """

    kind = "environment"


_TRANSIENT_SQLITE_MARKERS = ("database is locked", "database is busy", "disk i/o error")


# serialization_failure, deadlock_detected, lock_not_available, admin/crash shutdown, cannot_connect_now
_TRANSIENT_PGCODES = ("40001", "40P01", "55P03", "57P01", "57P02", "57P03")


def is_transient(exc: BaseException) -> bool:
    """True when ``exc`` is a failure that retrying the same step can cure."""
    if isinstance(exc, TransientError | CommitFailedException):
        return True
    if isinstance(exc, PermanentError):
        return False
    if isinstance(exc, sqlite3.OperationalError):
        return any(m in str(exc).lower() for m in _TRANSIENT_SQLITE_MARKERS)
    if isinstance(exc, duckdb.IOException):
        return True
    if type(exc).__module__.startswith("psycopg2"):
        # The team deployment's Postgres: a lost connection, a serialization
        # failure or a deadlock is cured by retrying; anything else (a
        # constraint, the append-only trigger, bad SQL) is not.
        return type(exc).__name__ == "OperationalError" or getattr(exc, "pgcode", None) in _TRANSIENT_PGCODES
    # Missing files and permissions are configuration problems, not flakiness.
    if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError):
        return False
    if isinstance(exc, OSError):
        return True
    # SQLAlchemy wraps the sqlite3/psycopg2 errors of the Iceberg SQL catalog.
    cause = exc.__cause__ or exc.__context__
    if cause is not None and cause is not exc and type(exc).__module__.startswith("sqlalchemy"):
        return is_transient(cause)
    return False
