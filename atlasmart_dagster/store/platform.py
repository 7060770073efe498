"""The platform: one object that opens the parts of an AtlasMart home, and checks them before they are trusted.

Dagster assets get it from ``AtlasmartResource``; the ``atlasmart`` command
line builds it directly. Both therefore read and write exactly the same
warehouse, raw store, ledger and clock.

**Every store is checked before it is trusted.** A home's stores only make
sense together: the ledger says which snapshots consumers are served, the
catalog says where those snapshots are, the raw store holds the evidence the
ledger's batches name. Lose one and the others would answer as if nothing had
ever happened there (an empty mart, every day DELAYED). So:

- the first use of an *empty* home (no ledger data, no catalog tables, no
  raw batches, no table files) creates the ledger and the catalog together and
  records one home id in both: the ledger's table ``home_identity`` and the
  catalog's namespace property ``atlasmart.home-id``. That use is the first
  access to the ledger or the first write to a table (reading tables of an
  empty home creates nothing). This is the only place stores are created;
- every later open reads both ids before anything else, and refuses
  (``StoreMissing``/``StoreForeign``, one line naming the store and saying to
  restore it) a store that is missing, was re-created empty, or carries
  another home's id;
- and checks the ledger's expectations of the other stores: every table the
  ledger has versions of is in the catalog, the catalog's tables are this
  home's files (their metadata lives under this home's ``warehouse/``, not
  all of it is gone, and a catalog without tables finds no table metadata
  there), and the raw store holds the ledger's batches (a single lost file
  is ``verify``'s finding, a lost store is refused here);
- a home from before identities (stores with data, no ids) is adopted once,
  if its stores agree with each other as above.

The check is one read of each store per process, a few milliseconds.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Iterator

from ..errors import StoreForeign, StoreMissing, is_transient
from .clock import Clock, format_ts, home_clock
from .home import AtlasmartHome, resolve_landing
from .landing import LandingZone
from .ledger import Ledger
from .ledger.batches import BATCHES
from .ledger.engine import HOME_IDENTITY
from .ledger.partition_states import PARTITION_EVENTS
from .ledger.run_records import RetrySpool, retry_key
from .locks import home_lock
from .raw_store import ObjectRawStore, RawStore
from .tables import NAMESPACE, TABLES_BY_NAME, embedded_home_of
from .warehouse import DEFAULT_CHUNK_ROWS, CatalogProbe, Warehouse

FIRST_USE = "first use"
ADOPTED = "adopted"
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HomeIdentity:
    """The id every store of a home records, when it was given and how (first use, or adopted)."""

    home_id: str
    created_at: str
    origin: str


@dataclass(frozen=True)
class _LedgerProbe:
    present: bool
    identity: HomeIdentity | None
    has_data: bool


class _QuietPostgresRetries(logging.Filter):
    """dagster-postgres logs every retry of a failed connection as a WARNING on the root logger.

    A Postgres outage then printed 26 ``WARNING:root:Retrying failed database
    connection`` lines before the one line that says what is wrong. They go to
    the ``atlasmart.postgres`` logger at DEBUG instead (quiet unless asked for);
    the final error is still raised and told.
    """

    PREFIXES = ("Retrying failed database connection", "Retrying failed database creation")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "root" and str(record.msg).startswith(self.PREFIXES):
            logging.getLogger("atlasmart.postgres").debug(record.getMessage())
            return False
        return True


def quiet_postgres_retries() -> None:
    """Route dagster-postgres' connection-retry warnings to a quiet logger (idempotent)."""
    root = logging.getLogger()
    if not any(isinstance(f, _QuietPostgresRetries) for f in root.filters):
        root.addFilter(_QuietPostgresRetries())


@dataclass
class Platform:
    home: AtlasmartHome
    landing_root: Path
    clock: Clock
    chunk_rows: int = DEFAULT_CHUNK_ROWS

    def __post_init__(self) -> None:
        self._first_use_lock = threading.Lock()

    @classmethod
    def open(
        cls,
        home: str | os.PathLike | None = None,
        landing: str | os.PathLike | None = None,
        clock: str | None = None,
        chunk_rows: int | None = None,
        embedded: bool = False,
        clock_asked_as: str = "--clock",
    ) -> "Platform":
        """Open a home; every argument falls back to its environment variable, then the default.

        The clock is the home's (``store/clock.py``, one clock per home): a
        ``clock`` (or ``$ATLASMART_CLOCK``) other than the home's is refused
        with ``HomeClockRefused``, named as ``clock_asked_as`` says.

        ``embedded`` opens a self-contained home even where the team settings are set (drills).
        The stores are checked when first used. In team mode the database is
        reached once here: an outage is one line at once, before Dagster's
        instance spends its retries on it.
        """
        resolved = AtlasmartHome.resolve(home, embedded=embedded).ensure()
        if resolved.team:
            from .ledger.postgres_engine import connect_team_database  # the `team` extra: psycopg2

            quiet_postgres_retries()
            connect_team_database(resolved.database_url).close()
        return cls(
            home=resolved,
            landing_root=resolve_landing(landing),
            clock=home_clock(resolved, clock, clock_asked_as),
            chunk_rows=chunk_rows or DEFAULT_CHUNK_ROWS,
        )

    @property
    def identity(self) -> HomeIdentity:
        """The home's identity, once its stores were checked against each other (see the module docstring)."""
        return self._checked.identity

    @cached_property
    def _checked(self) -> StoreCheck:
        check = check_stores(self.home, self._ledger, self._warehouse)
        if check.unborn:
            # An empty home: its stores are created together on first use (see the module docstring).
            self._ledger.engine.before_first_use = self._warehouse.before_first_use = self._first_use
        return check

    def _first_use(self) -> None:
        with self._first_use_lock:
            if not self._checked.unborn:
                return
            engine, warehouse = self._ledger.engine, self._warehouse
            engine.before_first_use = warehouse.before_first_use = None  # the stamps below are writes too
            try:
                self._checked = first_use(self.home, self._ledger, warehouse, self._checked)
            except BaseException:
                engine.before_first_use = warehouse.before_first_use = self._first_use
                raise

    @cached_property
    def _ledger(self) -> Ledger:
        return Ledger(self.home.database_url or self.home.ledger_db)

    @cached_property
    def _warehouse(self) -> Warehouse:
        return Warehouse(self.home, chunk_rows=self.chunk_rows)

    @property
    def warehouse(self) -> Warehouse:
        self._checked  # noqa: B018 - checks the stores the first time
        return self._warehouse

    @property
    def ledger(self) -> Ledger:
        self._checked  # noqa: B018 - checks the stores the first time
        return self._ledger

    @cached_property
    def retry_spool(self) -> RetrySpool:
        return RetrySpool(self.home.pending_retries)

    def record_step_retry(self, run_id: str, asset: str, attempt: int, at: datetime) -> None:
        """Count that a step started again, even while the storage it retries is down.

        The retry goes to the home's spool file first (``RetrySpool``: this
        machine's disk, neither the object store nor the ledger database),
        then to the ledger. The outage a step retries may be the ledger
        database's own (Postgres restarting, a locked ``ledger.db``): the record
        then waits in the spool, where the exporter counts it, until a later
        step writes it (``flush_step_retries``). Only a retry the spool could not take is
        lost, with the disk of the home.
        """
        self.retry_spool.append(run_id, asset, attempt, at)
        self.flush_step_retries()

    def flush_step_retries(self) -> None:
        """Move the spooled retries to the ledger; while the database refuses them (a transient error) they wait.

        A born home's ledger takes them without the store check, which reads
        the warehouse: the object store a retry is usually about may be down.
        An unborn home's is checked first (its stores are created together).
        """
        if not self.retry_spool.has_pending():
            return
        try:
            ledger = self._ledger if _ledger_identity(self._ledger) is not None else self.ledger
            self.retry_spool.drain(ledger.runs)
        except Exception as exc:
            if not is_transient(exc):
                raise
            logger.warning("step retries kept in %s until the ledger takes them: %s", self.retry_spool.path, exc)

    def step_retries(self) -> list[dict]:
        """Every step retry counted: the ledger's, then those still waiting in this home's spool."""
        recorded = self.ledger.runs.retries()
        known = {retry_key(r) for r in recorded}
        return recorded + [r for r in self.retry_spool.pending() if retry_key(r) not in known]

    @cached_property
    def raw_store(self) -> RawStore:
        self._checked  # noqa: B018 - checks the stores the first time
        return raw_store_of(self.home)

    @cached_property
    def landing(self) -> LandingZone:
        return LandingZone(self.landing_root)


def raw_store_of(home: AtlasmartHome) -> RawStore:
    """The home's raw store: its folder, or its prefix on the object store (cached in ``raw_dir``)."""
    if home.object_root is not None:
        return ObjectRawStore(home.raw_dir, home.objects, home.raw_uri)
    return RawStore(home.raw_dir)


# -- the check ------------------------------------------------------------------------
@dataclass(frozen=True)
class StoreCheck:
    """The outcome of checking a home's stores: its identity, and whether its stores are still to be created.

    ``unborn``: the home is empty (nothing in any store depends on another);
    its stores are created together, stamped with ``identity``, on first use
    (the ledger's first access or a table's first write), so a command refused
    before any work leaves nothing behind.
    """

    identity: HomeIdentity
    unborn: bool = False


def check_stores(home: AtlasmartHome, ledger: Ledger, warehouse: Warehouse) -> StoreCheck:
    """The home's identity once every store agrees with the others (see the module docstring).

    Raises ``StoreMissing`` or ``StoreForeign`` (one line: which store, what
    to do) instead of answering from a lost or replaced store.
    """
    identity = _ledger_identity(ledger)
    catalog = warehouse.probe_catalog()
    if identity is not None and catalog.home_id == identity.home_id:
        _check_expectations(home, ledger, catalog)
        return StoreCheck(identity)
    # Something to create, adopt or refuse: decided under the home's identity lock
    # (a Postgres advisory lock in team mode), so that no process judges a home
    # that another one is half-way through stamping.
    with _identity_lock(home):
        check = _establish(home, ledger, warehouse)
    if not check.unborn:
        _check_expectations(home, ledger, warehouse.probe_catalog())
    return check


def first_use(home: AtlasmartHome, ledger: Ledger, warehouse: Warehouse, check: StoreCheck) -> StoreCheck:
    """Create the stores of an empty home, stamped with one id (another process may have given it already)."""
    with _identity_lock(home):
        led, cat = _ledger_identity(ledger), warehouse.probe_catalog()
        if led and cat.home_id and led.home_id != cat.home_id:
            raise _foreign(home, cat.home_id, led.home_id)
        identity = led or (_new_identity(FIRST_USE, cat.home_id) if cat.home_id else check.identity)
        if cat.home_id is None:
            warehouse.stamp_catalog(identity.home_id)
        if led is None:
            ledger.engine.append(HOME_IDENTITY, {"home_id": identity.home_id, "created_at": identity.created_at,
                                                 "origin": identity.origin})
    return StoreCheck(_ledger_identity(ledger) or identity)


@contextmanager
def _identity_lock(home: AtlasmartHome) -> Iterator[None]:
    with ExitStack() as stack:
        try:
            stack.enter_context(home_lock(home, "identity"))
        except OSError:
            pass  # a home this process cannot write: nothing can be created in it, so there is nothing to race for
        yield


def _ledger_identity(ledger: Ledger) -> HomeIdentity | None:
    engine = ledger.engine
    if not engine.exists() or HOME_IDENTITY.name not in engine.table_names():
        return None
    rows = engine.select(HOME_IDENTITY, order_by="id", limit=1)
    return HomeIdentity(rows[0]["home_id"], rows[0]["created_at"], rows[0]["origin"]) if rows else None


def _probe_ledger(ledger: Ledger) -> _LedgerProbe:
    engine = ledger.engine
    if not engine.exists():
        return _LedgerProbe(False, None, False)
    names = engine.table_names()
    return _LedgerProbe(True, _ledger_identity(ledger), engine.has_rows(names - {HOME_IDENTITY.name}))


def _raw_batches(home: AtlasmartHome) -> bool:
    return raw_store_of(home).any_batches()


def _table_files(home: AtlasmartHome) -> bool:
    if home.objects is not None:
        return home.objects.any(home.warehouse_uri)
    return any(files for _, _, files in os.walk(home.warehouse_dir))


def _table_metadata_file(home: AtlasmartHome) -> str | Path | None:
    """One table metadata file in the home's warehouse, if any (a catalog without tables must find none)."""
    if home.objects is not None:
        return next(iter(home.objects.list(f"{home.warehouse_uri}/{NAMESPACE}", suffix=".metadata.json")), None)
    return next(home.warehouse_dir.glob(f"{NAMESPACE}/*/metadata/*.metadata.json"), None)


def _is_file(home: AtlasmartHome, location: str) -> bool:
    if home.objects is not None:
        return location.startswith("s3://") and home.objects.exists(location)
    return Path(location.removeprefix("file://")).is_file()


def _new_identity(origin: str, home_id: str | None = None) -> HomeIdentity:
    return HomeIdentity(home_id or uuid.uuid4().hex, format_ts(datetime.now(timezone.utc)), origin)


def _foreign(home: AtlasmartHome, catalog_id: str, ledger_id: str) -> StoreForeign:
    return StoreForeign(
        f"the catalog {home.catalog_where} (home id {catalog_id}) and the ledger {home.ledger_where} "
        f"(home id {ledger_id}) belong to different homes: one of them was replaced; {home.restore_hint}"
    )


def _establish(home: AtlasmartHome, ledger: Ledger, warehouse: Warehouse) -> StoreCheck:
    """Decide, under the identity lock: an empty home's first use, the adoption of an old home, or a refusal.

    A store without the home's id is another home's if it holds data, lost if
    another store depends on it (the catalog's tables, raw batches and table
    files on the ledger; the ledger's table versions and table files on the
    catalog), and otherwise simply not created yet: it is, when first used.
    """
    led = _probe_ledger(ledger)
    cat = warehouse.probe_catalog()
    ledger_id = led.identity.home_id if led.identity else None
    if ledger_id and ledger_id == cat.home_id:
        return StoreCheck(led.identity)  # another process stamped the home while this one waited
    if ledger_id and cat.home_id:
        raise _foreign(home, cat.home_id, ledger_id)
    files = _table_files(home)
    needs_ledger = (f"the catalog {home.catalog_where} holds {len(cat.tables)} tables" if cat.tables
                    else f"the raw store {home.raw_where} holds batches" if _raw_batches(home)
                    else f"{home.warehouse_where} holds table files" if files else None)
    versioned = _versioned_tables(ledger, cat)
    needs_catalog = (f"the ledger {home.ledger_where} has certified or built versions of {_listed(versioned)}"
                     if versioned else f"{home.warehouse_where} holds table files" if files else None)
    if ledger_id or cat.home_id:
        known = ledger_id or cat.home_id
        if ledger_id is None and (led.has_data or needs_ledger):
            because = needs_ledger or f"the catalog {home.catalog_where} belongs to home {known}"
            raise _ledger_refusal(home, led, because)
        if cat.home_id is None and (cat.tables or needs_catalog):
            because = needs_catalog or f"the ledger {home.ledger_where} belongs to home {known}"
            raise _catalog_refusal(home, cat, because)
        # The other store was never created (or was, empty): it is, with this id, on first use.
        return StoreCheck(led.identity or _new_identity(FIRST_USE, known), unborn=True)
    if not (led.has_data or needs_ledger):
        return StoreCheck(_new_identity(FIRST_USE), unborn=True)  # an empty home
    # No store carries an id but there is data: a home from before identities (or
    # a deployment `atlasmart migrate` filled). Adopt it if its stores agree.
    if needs_ledger and not led.has_data:
        raise _ledger_refusal(home, led, needs_ledger)
    if needs_catalog and not cat.tables:
        raise _catalog_refusal(home, cat, needs_catalog)
    _check_expectations(home, ledger, cat)
    identity = _new_identity(ADOPTED)
    warehouse.stamp_catalog(identity.home_id)
    ledger.engine.append(HOME_IDENTITY, {"home_id": identity.home_id, "created_at": identity.created_at,
                                         "origin": identity.origin})
    return StoreCheck(_ledger_identity(ledger) or identity)


def _catalog_refusal(home: AtlasmartHome, cat: CatalogProbe, because: str) -> Exception:
    if not cat.present:
        return StoreMissing(f"the Iceberg catalog {home.catalog_where} is missing, but {because}: "
                            f"{home.restore_hint}; AtlasMart never re-creates a lost store")
    if not cat.tables:
        return StoreMissing(f"the Iceberg catalog {home.catalog_where} holds no tables and no home id (it was lost "
                            f"and re-created empty), but {because}: {home.restore_hint}")
    return StoreForeign(f"the Iceberg catalog {home.catalog_where} carries no home id, but {because}: it is not "
                        f"this home's catalog; {home.restore_hint}")


def _ledger_refusal(home: AtlasmartHome, led: _LedgerProbe, because: str) -> Exception:
    if not led.present:
        return StoreMissing(f"the ledger {home.ledger_where} is missing, but {because}: {home.restore_hint}; "
                            f"AtlasMart never re-creates a lost store")
    if not led.has_data:
        return StoreMissing(f"the ledger {home.ledger_where} holds nothing and no home id (it was lost and "
                            f"re-created empty), but {because}: {home.restore_hint}")
    return StoreForeign(f"the ledger {home.ledger_where} carries no home id, but {because}: it is not this home's "
                        f"ledger; {home.restore_hint}")


def _listed(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more tables" if len(names) > 3 else "")


def _versioned_tables(ledger: Ledger, catalog: CatalogProbe, names: set[str] | None = None) -> list[str]:
    """Tables the ledger has versions of (a snapshot it certified or built) that the catalog does not hold."""
    engine = ledger.engine
    if PARTITION_EVENTS.name not in (engine.table_names() if names is None else names):
        return []
    return [name for name in TABLES_BY_NAME if name not in catalog.tables and engine.select(
        PARTITION_EVENTS, "asset = ? AND snapshot_id IS NOT NULL", (name,), limit=1)]


def _copied_from(home: AtlasmartHome, location: str) -> str | None:
    """The home path ``location`` names, when this embedded home holds that very file in its own warehouse
    (a home copied or moved with ``cp -a``, or restored from a backup taken at another path); else None."""
    named = None if home.team or home.objects is not None else embedded_home_of(location)
    if named is None:
        return None
    root, rest = named
    return root if (home.warehouse_dir / NAMESPACE / rest).is_file() else None


def _check_expectations(home: AtlasmartHome, ledger: Ledger, catalog: CatalogProbe) -> None:
    """The ledger's expectations of the catalog and the raw store, and the catalog's of the table files."""
    names = ledger.engine.table_names()
    lacking = _versioned_tables(ledger, catalog, names)
    if lacking:
        raise StoreMissing(
            f"the Iceberg catalog {home.catalog_where} lacks {_listed(lacking)}, which the ledger "
            f"{home.ledger_where} has certified or built versions of: {home.restore_hint}"
        )
    prefix = f"{home.warehouse_uri}/{NAMESPACE}/"
    outside = sorted(loc for loc in catalog.tables.values() if not loc.startswith(prefix))
    if outside:
        copied_from = _copied_from(home, outside[0])
        if copied_from is not None:
            raise StoreForeign(
                f"the Iceberg catalog {home.catalog_where} names table files outside this home's warehouse "
                f"{home.warehouse_where} ({outside[0]}): the home was copied or moved here from "
                f"{copied_from}, and Iceberg metadata holds absolute paths; run `atlasmart relocate` to rewrite it "
                f"for this path (docs/recovery.md)"
            )
        raise StoreForeign(
            f"the Iceberg catalog {home.catalog_where} names table files outside this home's warehouse "
            f"{home.warehouse_where} ({outside[0]}): it is another home's catalog; {home.restore_hint} (a home "
            f"copied or moved with its table files is made to work here with `atlasmart relocate`)"
        )
    stray = None if catalog.tables else _table_metadata_file(home)
    if stray is not None:
        raise StoreForeign(
            f"the Iceberg catalog {home.catalog_where} holds no tables, but {home.warehouse_where} holds table metadata "
            f"({stray}): those tables are another home's (a wrong database or shared folder), or the catalog lost "
            f"them; {home.restore_hint}"
        )
    if catalog.tables and not any(_is_file(home, loc) for loc in catalog.tables.values()):
        raise StoreMissing(
            f"the table files of this home are missing: {home.warehouse_where} holds none of the "
            f"{len(catalog.tables)} tables' metadata that the catalog {home.catalog_where} names: {home.restore_hint}"
        )
    batches = ledger.engine.select(BATCHES) if BATCHES.name in names else []
    raw = raw_store_of(home) if batches else None
    if batches and not any(raw.holds(b["partition"], b["batch_id"]) for b in batches):
        raise StoreMissing(
            f"the raw store {home.raw_where} holds none of the {len(batches)} batches the ledger "
            f"{home.ledger_where} admitted: it is missing or another home's; {home.restore_hint}"
        )
