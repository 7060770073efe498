"""Where AtlasMart keeps its state: the embedded default home.

One folder, ``ATLASMART_HOME`` (default ``./.atlasmart``), holds everything
that makes the data product, so a backup, a restore or a scratch drill is one
folder:

``catalog.db``   Iceberg SQL catalog (SQLite)
``warehouse/``   Iceberg table metadata and Parquet data files
``raw/``         the immutable raw store, one folder per batch id
``ledger.db``    append-only ledger: batches, checks, certification, SLOs, incidents
``clock.json``   logical time (drills and tests only)
``clock-choice.json`` the one clock the home runs on, system or logical (``store/clock.py``)
``dagster/``     a DAGSTER_HOME prepared with the project's instance config
``artifacts/``   drill evidence, notices, runbooks

The sample landing zone ships inside the package and is the default source.

The team deployment (docs/deploying.md) moves what must be shared
out of the folder, chosen by two settings: ``ATLASMART_DATABASE_URL``
(``postgresql://...``) holds the ledger (schema ``atlasmart_ledger``) and the
Iceberg catalog; ``ATLASMART_WAREHOUSE`` is a path every worker mounts and
holds ``warehouse/`` and ``raw/``. The home folder then keeps only what is
per machine: the clock, the Dagster home, artifacts and (unused) lock files.

``ATLASMART_WAREHOUSE`` may instead be an object store, ``s3://bucket/prefix``
(with ``ATLASMART_S3_ENDPOINT`` for an S3 API other than AWS's, and the
standard AWS credential variables): ``warehouse/`` and ``raw/`` are then
prefixes in the bucket (``store/object_store.py``, docs/object-storage.md),
and the home keeps a cache of the raw batches it read.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from ..errors import UsageError
from .object_store import ENDPOINT_ENV, S3Location, S3Store, is_object_store_url, s3_store

HOME_ENV = "ATLASMART_HOME"
LANDING_ENV = "ATLASMART_LANDING"
DATABASE_URL_ENV = "ATLASMART_DATABASE_URL"
WAREHOUSE_ENV = "ATLASMART_WAREHOUSE"
CLOCK_ENV = "ATLASMART_CLOCK"
DEFAULT_HOME_DIRNAME = ".atlasmart"


def sample_dir() -> Path:
    """The bundled sample source (landing zone and reference dimensions)."""
    return Path(str(resources.files("atlasmart_dagster") / "sample_data"))


def sample_landing_dir() -> Path:
    return sample_dir() / "landing"


def resolve_landing(path: str | os.PathLike | None = None) -> Path:
    """Explicit path, else ``$ATLASMART_LANDING``, else the bundled sample."""
    chosen = path or os.environ.get(LANDING_ENV)
    return Path(chosen).resolve() if chosen else sample_landing_dir()


# What a folder of the home may not hold: the stores are opened through URLs (the SQLite catalog through
# SQLAlchemy, the Iceberg warehouse as file://), where "?" starts a query and "#" a fragment, so the files
# would land in a truncated path beside the home; a control character is no name a person can type back.
_URL_SPECIAL = re.compile("[?#\x00-\x1f\x7f-\x9f]")


def home_path_problem(path: str | os.PathLike, what: str = "the home path") -> str | None:
    """Why ``path`` cannot hold a home's stores (a ``?``, ``#`` or control character in it), or None."""
    found = sorted(set(_URL_SPECIAL.findall(str(path))))
    if not found:
        return None
    names = ", ".join(repr(c) for c in found)
    return (f"{what} {str(path)!r} holds {names}, which the catalog's and the warehouse's URLs read as "
            "more than a path (its files would be written beside the home): choose a path without ?, # or "
            "control characters")


@dataclass(frozen=True)
class AtlasmartHome:
    """Paths inside one AtlasMart home folder, and the shared places of a team deployment."""

    root: Path
    # Team mode: the Postgres database of the ledger and the catalog, and the
    # shared folder of table data and raw batches. Both None: embedded.
    database_url: str | None = None
    shared_root: Path | None = None
    # Team mode on an object store: the bucket and prefix of table data and raw batches (shared_root is None).
    object_root: S3Location | None = None

    @classmethod
    def resolve(cls, path: str | os.PathLike | None = None, embedded: bool = False) -> "AtlasmartHome":
        """Explicit path, else ``$ATLASMART_HOME``, else ``./.atlasmart``; team mode from the environment.

        ``embedded``: a self-contained scratch home whatever the environment says
        (drills rehearse on one and must never write into a team's shared state).
        """
        chosen = path or os.environ.get(HOME_ENV) or Path.cwd() / DEFAULT_HOME_DIRNAME
        database_url = os.environ.get(DATABASE_URL_ENV) or None
        warehouse = os.environ.get(WAREHOUSE_ENV) or None
        if embedded or (database_url is None and warehouse is None):
            return cls(Path(chosen).resolve())
        if database_url is None or warehouse is None:
            missing = DATABASE_URL_ENV if database_url is None else WAREHOUSE_ENV
            raise UsageError(
                f"the team deployment needs both ${DATABASE_URL_ENV} and ${WAREHOUSE_ENV}; ${missing} is not set "
                f"(unset both for the embedded default)"
            )
        if not database_url.startswith(("postgresql://", "postgresql+psycopg2://", "postgres://")):
            raise UsageError(f"${DATABASE_URL_ENV} must be a postgresql:// URL, not {database_url.split(':')[0]}://...")
        if not complete_postgres_url(database_url):
            raise UsageError(f"${DATABASE_URL_ENV} needs a host and a database: postgresql://USER@HOST[:PORT]/DATABASE "
                             f"(not {redacted_url(database_url)})")
        if is_object_store_url(warehouse):
            try:
                location = S3Location.from_environment(warehouse)
            except ValueError as exc:
                raise UsageError(f"${WAREHOUSE_ENV}: {exc} (a bucket name is 3-63 lower-case letters, digits, "
                                 f"dots and hyphens)") from None
            return cls(Path(chosen).resolve(), database_url, None, location)
        if os.environ.get(ENDPOINT_ENV):
            raise UsageError(f"${ENDPOINT_ENV} is set but ${WAREHOUSE_ENV} is the folder {warehouse}, not an "
                             f"s3://bucket/prefix: unset it, or point ${WAREHOUSE_ENV} at the bucket")
        return cls(Path(chosen).resolve(), database_url, Path(warehouse).resolve())

    @property
    def team(self) -> bool:
        """True in the team deployment (shared Postgres and shared folder)."""
        return self.database_url is not None

    @property
    def catalog_db(self) -> Path:
        return self.root / "catalog.db"

    @property
    def catalog_uri(self) -> str:
        """The SQLAlchemy URL of the Iceberg SQL catalog: SQLite in the home, or the team's Postgres."""
        if self.database_url is None:
            # A SQLite file: URI, percent-quoted, so that no character of the path (a space, %, ?, #) is read
            # as part of the URL: SQLAlchemy passes a plain sqlite:/// path on as typed, up to the first "?",
            # while SQLite decodes a file: URI itself. timeout: wait for the write lock instead of failing.
            return f"sqlite:///file:{quote(str(self.catalog_db))}?uri=true&timeout=60"
        return sqlalchemy_postgres_url(self.database_url)

    @property
    def data_root(self) -> Path:
        """Where table data and raw batches live: the shared folder in team mode, else the home."""
        return self.shared_root or self.root

    @property
    def warehouse_dir(self) -> Path:
        """The folder of table files (on an object store: unused, see ``warehouse_uri``)."""
        return self.data_root / "warehouse"

    @property
    def raw_dir(self) -> Path:
        """The raw store's folder; on an object store, this machine's cache of the batches it read."""
        return self.data_root / ("raw-cache" if self.object_root else "raw")

    @property
    def objects(self) -> S3Store | None:
        """The object store of table files and raw batches, or None when they are in a folder."""
        return s3_store(self.object_root) if self.object_root else None

    @property
    def warehouse_uri(self) -> str:
        """The Iceberg warehouse location: ``file://`` of the folder, or ``s3://bucket/prefix/warehouse``."""
        return self.object_root.child("warehouse") if self.object_root else f"file://{self.warehouse_dir}"

    @property
    def raw_uri(self) -> str | None:
        """The raw store's ``s3://`` prefix on an object store (None: the folder ``raw_dir``)."""
        return self.object_root.child("raw") if self.object_root else None

    @property
    def warehouse_where(self) -> str:
        """The table files' place as messages say it."""
        return self.warehouse_uri if self.object_root else str(self.warehouse_dir)

    @property
    def raw_where(self) -> str:
        return self.raw_uri if self.object_root else str(self.raw_dir)

    @property
    def ledger_db(self) -> Path:
        return self.root / "ledger.db"

    @property
    def clock_file(self) -> Path:
        return self.root / "clock.json"

    @property
    def pending_retries(self) -> Path:
        """Step retries the ledger has not taken yet, on this machine's disk in every mode (``RetrySpool``)."""
        return self.root / "step_retries.pending.jsonl"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster"

    @property
    def locks_dir(self) -> Path:
        return self.root / "locks"

    @property
    def ledger_where(self) -> str:
        """Where the ledger is, as a message says it after "the ledger": its file, or the team database's schema."""
        return str(self.ledger_db) if self.database_url is None else (
            f"in the team database {redacted_url(self.database_url)} (schema atlasmart_ledger)")

    @property
    def catalog_where(self) -> str:
        """Where the Iceberg catalog is, as a message says it after "the catalog": its file, or the team database."""
        return str(self.catalog_db) if self.database_url is None else (
            f"in the team database {redacted_url(self.database_url)}")

    @property
    def restore_hint(self) -> str:
        """What to do about a lost or replaced store of this home."""
        if self.database_url is None:
            return f"restore the home {self.root} from a backup (atlasmart restore BACKUP)"
        if self.object_root is not None:
            return (f"restore the team database and the bucket prefix {self.object_root.where} together from their "
                    f"backups (the database first, then the bucket's object versions or copy of the same time), "
                    f"then run atlasmart verify")
        return (f"restore the team database and the shared folder {self.shared_root} together from their backups "
                f"(pg_restore or point-in-time recovery, then the folder's snapshot), then run atlasmart verify")

    def ensure(self) -> "AtlasmartHome":
        """Create the home folder; raise ``UsageError`` if the home is not a folder or cannot be created.

        Only the folder: the stores in it (ledger, catalog, ``warehouse/``,
        ``raw/``) are created when an empty home first uses them, after they
        were checked (``store/platform.py``), so a lost store is never re-created.
        """
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(
                f"the AtlasMart home {self.root} is not a folder: choose a folder (--home or ${HOME_ENV})"
            )
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"cannot create the AtlasMart home {self.root} ({exc.strerror}: {exc.filename}): "
                f"choose a folder you can write (--home or ${HOME_ENV})"
            ) from exc
        return self


# Less free space than this is a full disk for SQLite (a write of one page and its WAL frame fails).
_FULL_DISK_BYTES = 1 << 20


@dataclass(frozen=True)
class WriteFault:
    """Why the machine refuses writes to a store's file: ``read_only``, ``full`` or ``permissions``, in one line."""

    reason: str
    message: str


def heal_shm(path: Path) -> None:
    """Give a leftover ``-shm`` of the SQLite store ``path`` back its owner's write permission, where it is ours.

    SQLite makes a ``-shm`` with the database's mode, so a database once made
    read-only (0444) and fixed since leaves a 0444 ``-shm`` that refuses every
    later write. The file is only SQLite's shared-memory index, so making it
    writable again for its owner loses nothing; one of another user's stays
    as it is, and ``write_fault`` names it with the fix.
    """
    shm = Path(f"{path}-shm")
    try:
        info = shm.stat()
        if info.st_uid != os.geteuid() or info.st_mode & stat.S_IWUSR or not os.access(path, os.W_OK):
            return
        shm.chmod(stat.S_IMODE(info.st_mode) | stat.S_IRUSR | stat.S_IWUSR)
    except OSError:
        return  # not there, or not ours to change: the open decides


def write_fault(path: Path) -> WriteFault | None:
    """Why this machine will not let AtlasMart write the SQLite store ``path`` (or into the folder), or None.

    Looked at after SQLite refused a write or an open, so that the one line
    names the file and the remedy instead of "unable to open database file"
    or "disk I/O error". A leftover ``-shm`` may be removed once no process has
    the home open (SQLite rebuilds it); a ``-wal`` never (it can hold committed
    transactions), so only its permissions are to fix.
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    reads = "status, controls and verify only read, and work on a read-only home"
    try:
        fs = os.statvfs(folder)
    except OSError:
        return None
    if fs.f_flag & os.ST_RDONLY:
        return WriteFault("read_only", f"cannot write {path}: the home is on a read-only file system: remount it "
                                       f"read-write to run this command; {reads}")
    free = fs.f_bavail * fs.f_frsize
    if free < _FULL_DISK_BYTES:
        return WriteFault("full", f"cannot write {path}: the disk holding it is full ({free // 1024} KiB free); "
                                  f"free space on it, then run the command again")
    for side, remedy in (("-wal", "fix its permissions (it may hold committed transactions: never delete it)"),
                         ("-shm", f"fix its permissions (chmod u+w {path}-shm, as its owner), or remove it "
                                  "when no process uses the home (SQLite rebuilds it)"),
                         ("-journal", "fix its permissions")):
        leftover = Path(f"{path}{side}")
        if leftover.exists() and not os.access(leftover, os.R_OK | os.W_OK):
            mode = stat.S_IMODE(leftover.stat().st_mode)
            return WriteFault("permissions", f"cannot write {path}: {leftover} is not writable (mode {mode:04o}): "
                                             f"{remedy}")
    if path.exists() and not os.access(path, os.W_OK):
        mode = stat.S_IMODE(path.stat().st_mode)
        return WriteFault("permissions", f"cannot write {path}: the file is read-only (mode {mode:04o}): make it "
                                         f"writable (chmod u+w {path})")
    if not os.access(folder, os.W_OK):
        return WriteFault("read_only", f"cannot write {path}: the folder {folder} is read-only (no write "
                                       f"permission): make it writable to run this command; {reads}")
    return None


def redacted_url(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)))


def complete_postgres_url(url: str) -> bool:
    """Whether ``url`` names a host and a database (in the URL or as ``?host=``/``?dbname=``), so libpq never falls
    back to its defaults (the local socket, a database named after the OS user) and creates the ledger there."""
    from urllib.parse import parse_qs

    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return False
    query = parse_qs(parts.query)
    return bool((host or query.get("host")) and (parts.path.strip("/") or query.get("dbname")))


def sqlalchemy_postgres_url(url: str) -> str:
    """``postgresql+psycopg2://`` for a ``postgresql://``/``postgres://`` URL (SQLAlchemy 2.0's psycopg2 dialect)."""
    scheme, _, rest = url.partition("://")
    return f"postgresql+psycopg2://{rest}" if scheme in ("postgresql", "postgres") else url


def libpq_url(url: str) -> str:
    """The plain ``postgresql://`` form psycopg2 and dagster-postgres accept."""
    _, _, rest = url.partition("://")
    return f"postgresql://{rest}"
