"""Moving up: copy an embedded home into a team deployment, every snapshot id and ledger row intact.

``atlasmart migrate --to team`` copies what makes the data product (the
ledger, the Iceberg catalog's entries, the table files and the raw batches)
from an embedded home into an empty team deployment: a Postgres database and
a shared folder. It copies, never moves: the embedded home is only read, and
stays the fallback.

**Why the Iceberg metadata is rewritten rather than replayed.** Certification
pins snapshot ids: every CERTIFIED and BUILT event in the ledger names the
snapshot consumers are served and a rollback returns to, and ``verify`` reads
each certified partition *at that snapshot*. Fingerprints are computed from
rows, not ids, but the version they vouch for is found by its id. Iceberg
metadata holds absolute ``file://`` paths of the old home, though: the table
location and the manifest-list paths in the metadata JSON, the manifest paths
(and byte lengths) in each manifest list, the data file paths in each
manifest. pyiceberg's ``register_table`` only points a catalog at an existing
metadata file; it does not move one. Three ways were open:

- replay the certified partitions into new tables: new snapshot ids, so the
  ledger's rows would have to be edited on the way (the one thing an
  append-only ledger must never need), and every older version, the rollback
  targets included, would be lost;
- keep the old paths: only if every machine mounts the shared folder at the
  old home's path, which no team can promise;
- rewrite the paths in copies of the metadata.

We rewrite, because it changes nothing but locations and can be checked.
Every file reachable from a retained snapshot is copied (what ``atlasmart
backup`` copies). Avro files are decoded and re-encoded with their own schema
and header by pyiceberg's Avro reader and writer (unchanged, that round trip
gives the same bytes but for the random sync marker), manifests first, so that
each manifest list carries its manifests' new lengths. The metadata JSON keeps
every field except the locations, and drops ``metadata-log``: previous metadata
files are history nothing reads, and are not copied. A path outside the old
warehouse, or an old path left anywhere in a rewritten file, stops the
migration. Before anything is committed every table is read back from its new
metadata and must have the same snapshots as the source, and every snapshot
the same data files.

**All or nothing.** A target that holds anything (ledger rows, AtlasMart tables
in the catalog, files in the shared ``warehouse/`` or ``raw/``) is refused:
a migration never merges into or overwrites a deployment. The source's
committed state is read (the ledger in one read transaction, then the catalog,
as backup does, so every snapshot the ledger names is in it), and the copies
are written into a hidden staging folder in the shared folder. Then, in one
Postgres transaction that holds the ledger's write lock, the checks are
repeated, every ledger table is appended in rowid order (ids and all columns
included) and read back, the catalog entries are inserted (the catalog lives in
the same database, so in the same transaction), the staged folders
are moved into place and the tables are checked; then it commits. Any failure
rolls the transaction back and removes the copies. Only a crash between
moving the folders and the commit leaves files behind, and the next migrate
refuses them with a message saying to remove them.

**Into an object store.** With ``--warehouse s3://bucket/prefix`` the
locations are rewritten to the bucket's, the copies are staged in a hidden
folder of the home (not in the bucket, which has no rename), and "moving the
staged folders into place" is putting every staged file under the prefix
(raw evidence with write-once puts); a failure before the commit deletes what
was put. The refusal of a target that holds anything covers the prefix: an
object under its ``warehouse/`` or ``raw/`` is content.

Stop the embedded home's writers first: what they commit after the migration
has read the ledger stays only in the embedded home. The Dagster run history
stays with the home; the ledger is the product's record.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pyiceberg.table import StaticTable

from ...errors import AtlasmartError, TransientError, UsageError
from ...product.access.access_log import ACCESS_LOG
from ...product.batch_lifecycle import BATCH_DECISIONS
from ...product.contract_approvals import CONTRACT_APPROVALS, CONTRACT_MAPPINGS
from ...product.dashboards import DASHBOARD_DEPLOYMENTS
from ...product.restatements import RESTATEMENT_APPROVALS
from ...settings import current
from ...store.clock import home_clock
from ...store.home import (
    DATABASE_URL_ENV,
    DEFAULT_HOME_DIRNAME,
    HOME_ENV,
    WAREHOUSE_ENV,
    AtlasmartHome,
    complete_postgres_url,
    libpq_url,
    resolve_landing,
)
from ...store.ledger import Ledger
from ...store.ledger.backfill_requests import BACKFILL_REQUESTS
from ...store.ledger.batches import BATCHES
from ...store.ledger.check_results import CHECK_RESULTS
from ...store.ledger.engine import HOME_IDENTITY, ID_ALLOCATIONS, LedgerTable
from ...store.ledger.holds import CERTIFICATION_HOLDS
from ...store.ledger.incidents import INCIDENT_EVENTS, INCIDENTS
from ...store.ledger.notification_deliveries import NOTIFICATION_DELIVERIES
from ...store.ledger.partition_states import PARTITION_EVENTS
from ...store.ledger.postgres_engine import SCHEMA as LEDGER_SCHEMA
from ...store.ledger.run_records import RUN_PHASES, STEP_RETRIES
from ...store.ledger.slo_records import SLO_RECORDS
from ...store.object_store import S3Location, is_object_store_url
from ...store.platform import Platform
from ...store.tables import NAMESPACE
from ...store.warehouse import Warehouse
from ..gameday import AUTOMATION_TICKS
from .iceberg_paths import FILE, PathMap, relocate_data_files, relocate_manifests, rewrite_avro

# Every ledger table, in the order they are copied. A table of the embedded
# ledger that is not here stops the migration: nothing is skipped silently
# (and the migration's tests fail when a declaration is added without it).
LEDGER_TABLES: tuple[LedgerTable, ...] = (
    ID_ALLOCATIONS,
    BATCHES,
    BATCH_DECISIONS,
    CONTRACT_APPROVALS,
    CONTRACT_MAPPINGS,
    CHECK_RESULTS,
    PARTITION_EVENTS,
    CERTIFICATION_HOLDS,
    RESTATEMENT_APPROVALS,
    SLO_RECORDS,
    BACKFILL_REQUESTS,
    RUN_PHASES,
    STEP_RETRIES,
    DASHBOARD_DEPLOYMENTS,
    INCIDENTS,
    INCIDENT_EVENTS,
    ACCESS_LOG,
    AUTOMATION_TICKS,
    NOTIFICATION_DELIVERIES,
    HOME_IDENTITY,
)
# The embedded home's identity stays with it: the team deployment is another
# deployment, stamped with its own id on its first use (store/platform.py).
NOT_COPIED = (HOME_IDENTITY,)
_IDENTITY_KEY = re.compile(r"\bid\s+INTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT", re.IGNORECASE)


class MigrationError(AtlasmartError):
    """A migration was refused, or stopped; the target is left as it was."""


# -- choosing the source and the target -------------------------------------------
def embedded_source(path: str | os.PathLike | None = None) -> AtlasmartHome:
    """The embedded home to migrate: ``path``, else ``$ATLASMART_HOME``, else ``./.atlasmart``.

    Never in team mode, whatever the environment says: the team settings name
    the target. Nothing is created in it.
    """
    root = Path(path or current().home or Path.cwd() / DEFAULT_HOME_DIRNAME).resolve()
    home = AtlasmartHome(root)
    missing = [p.name for p in (home.ledger_db, home.catalog_db) if not p.is_file()]
    if missing:
        raise UsageError(f"{root} is not an embedded AtlasMart home with data (no {' or '.join(missing)}): "
                         f"choose the home to migrate with --home or ${HOME_ENV}")
    return home


def team_target(source: AtlasmartHome, database_url: str | None = None,
                warehouse: str | os.PathLike | None = None) -> AtlasmartHome:
    """The team deployment to migrate into, from the arguments, else ``$ATLASMART_DATABASE_URL``/``$ATLASMART_WAREHOUSE``.

    Its home folder (clock, Dagster home, locks: what stays per machine) is the
    source's folder, whose embedded files team mode does not read.
    """
    settings = current()
    url = database_url or settings.database_url
    shared = warehouse or settings.warehouse
    if url is None or shared is None:
        raise UsageError(f"migrate --to team needs the team deployment's database and shared folder: --database-url "
                         f"URL --warehouse PATH (or ${DATABASE_URL_ENV} and ${WAREHOUSE_ENV})")
    if not url.startswith(("postgresql://", "postgresql+psycopg2://", "postgres://")):
        raise UsageError(f"the team database must be a postgresql:// URL, not {url.split(':')[0]}://...")
    if not complete_postgres_url(url):
        raise UsageError(f"the team database needs a host and a database: postgresql://USER@HOST[:PORT]/DATABASE "
                         f"(not {redacted(url)})")
    if is_object_store_url(str(shared)):
        try:
            return AtlasmartHome(source.root, url, None, S3Location.from_environment(str(shared)))
        except ValueError as exc:
            raise UsageError(f"--warehouse: {exc}") from None
    shared_root = Path(shared).resolve()
    if shared_root.exists() and not shared_root.is_dir():
        raise UsageError(f"the shared folder {shared_root} is not a folder")
    if shared_root == source.root or any(shared_root.is_relative_to(d) for d in (source.warehouse_dir, source.raw_dir)):
        raise UsageError(f"the shared folder {shared_root} is the embedded home or inside its warehouse/ or raw/: "
                         f"choose a folder outside them")
    return AtlasmartHome(source.root, url, shared_root)


def redacted(url: str) -> str:
    """``url`` without its password, for printing."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def team_platform(target: AtlasmartHome, landing: str | os.PathLike | None = None,
                  clock: str | None = None) -> Platform:
    """The platform of a team deployment, as ``Platform.open`` gives it with the team settings in the environment."""
    home = target.ensure()
    return Platform(home=home, landing_root=resolve_landing(landing), clock=home_clock(home, clock))


# -- refusing a target that holds anything ------------------------------------------
def _occupied_database(cur) -> list[str]:
    """What the target database already holds of a deployment (ledger rows, AtlasMart tables in the catalog)."""
    found, rows = [], {}
    cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                "AND table_type = 'BASE TABLE' ORDER BY 1", (LEDGER_SCHEMA,))
    for (name,) in cur.fetchall():
        if name in {t.name for t in NOT_COPIED}:
            continue  # a deployment opened but never used carries only its identity
        cur.execute(f'SELECT count(*) FROM {LEDGER_SCHEMA}."{name}"')
        (count,) = cur.fetchone()
        if count:
            rows[name] = count
    if rows:
        found.append(f"the ledger (schema {LEDGER_SCHEMA}) has {sum(rows.values())} rows in {len(rows)} tables "
                     f"({', '.join(sorted(rows)[:4])}{', ...' if len(rows) > 4 else ''})")
    cur.execute("SELECT to_regclass('iceberg_tables') IS NOT NULL")
    if cur.fetchone()[0]:
        cur.execute("SELECT table_name FROM iceberg_tables WHERE catalog_name = %s ORDER BY 1", (NAMESPACE,))
        tables = [name for (name,) in cur.fetchall()]
        if tables:
            found.append(f"the catalog has {len(tables)} AtlasMart tables ({', '.join(tables[:4])}"
                         f"{', ...' if len(tables) > 4 else ''})")
    return found


def _occupied_folder(target: AtlasmartHome) -> list[str]:
    """The shared ``warehouse/`` or ``raw/`` when it holds a file (empty folders are what opening a deployment makes)."""
    found = []
    if target.objects is not None:
        return [f"{prefix} already has content" for prefix in (target.warehouse_uri, target.raw_uri)
                if target.objects.any(prefix)]
    for folder in (target.warehouse_dir, target.raw_dir):
        if folder.exists() and (not folder.is_dir() or any(not p.is_dir() for p in folder.rglob("*"))):
            found.append(f"{folder} already has content")
    return found


def _refusal(target: AtlasmartHome, found: list[str]) -> MigrationError:
    return MigrationError(
        f"the team deployment ({redacted(target.database_url)}, {_shared_where(target)}) is not empty: "
        f"{'; '.join(found)}. migrate never merges into or overwrites a deployment; nothing was changed "
        f"(files left by an interrupted migrate can be removed, then migrate again)"
    )


def check_target_empty(target: AtlasmartHome) -> None:
    """Refuse a target that holds anything, before anything is written."""
    import psycopg2  # the `team` extra

    try:
        con = psycopg2.connect(libpq_url(target.database_url), connect_timeout=10)
    except psycopg2.OperationalError as exc:
        raise TransientError(f"the team database {redacted(target.database_url)} is unreachable "
                             f"({str(exc).strip().splitlines()[0]}); nothing was changed") from exc
    try:
        with con.cursor() as cur:
            found = _occupied_database(cur)
    finally:
        con.close()
    found += _occupied_folder(target)
    if found:
        raise _refusal(target, found)


# -- reading the source's committed state -------------------------------------------
def _read_only(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=60)
    con.row_factory = sqlite3.Row
    return con


def read_ledger(source: AtlasmartHome) -> list[tuple[LedgerTable, list[dict[str, Any]]]]:
    """Every row of the embedded ledger, table by table in rowid order, from one read transaction.

    A table no ``LedgerTable`` declares stops the migration (it would be lost).
    """
    declared = {t.name: t for t in LEDGER_TABLES}
    con = _read_only(source.ledger_db)
    try:
        con.execute("BEGIN")  # one snapshot of the ledger, while writers may go on
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        names = {n for n in names if not n.startswith("sqlite_")}
        unknown = sorted(names - declared.keys())
        if unknown:
            raise MigrationError(f"the embedded ledger has tables this version does not declare ({', '.join(unknown)}): "
                                 f"migrate with the AtlasMart version that wrote them; nothing was changed")
        out = [(t, [dict(r) for r in con.execute(f"SELECT * FROM {t.name} ORDER BY rowid")])
               for t in LEDGER_TABLES if t.name in names and t not in NOT_COPIED]
        con.execute("COMMIT")
    finally:
        con.close()
    return out


def read_catalog(source: AtlasmartHome) -> list[dict[str, Any]]:
    """The catalog's rows, by table name; a row that is not an AtlasMart table with metadata stops the migration."""
    con = _read_only(source.catalog_db)
    try:
        rows = [dict(r) for r in con.execute("SELECT * FROM iceberg_tables ORDER BY table_name")]
    finally:
        con.close()
    strange = [f"{r['table_namespace']}.{r['table_name']}" for r in rows
               if r["catalog_name"] != NAMESPACE or r["table_namespace"] != NAMESPACE or not r["metadata_location"]]
    if strange:
        raise MigrationError(f"the embedded catalog has entries that are not AtlasMart tables with metadata "
                             f"({', '.join(strange)}); nothing was changed")
    return rows


# -- rewriting Iceberg metadata (ops/recovery/iceberg_paths.py) -------------------------------
class _Locations(PathMap):
    """Maps file URIs of the old warehouse to the new one, and to where their copy is staged."""

    error = MigrationError

    def __init__(self, source: AtlasmartHome, target: AtlasmartHome, staging: Path):
        self.old = str(source.warehouse_dir)
        # The new warehouse's location as Iceberg records it: file://<folder>, or s3://bucket/prefix/warehouse.
        self.new = target.warehouse_uri
        self.staging = staging / "warehouse"

    def relative(self, uri: str, root: str | None = None) -> str:
        """``uri``'s path under the old warehouse (a folder), or under ``root`` (a location URI)."""
        base = root or f"{FILE}{self.old}"
        if not uri.startswith(base + "/"):
            raise MigrationError(f"{uri} is not a file of the warehouse {root or self.old}: migrate cannot move it; "
                                 f"nothing was changed")
        return uri[len(base) + 1:]


def _live_data_files(table: StaticTable, snapshot, seen: dict[str, list[str]]) -> list[str]:
    """The data files a read of ``snapshot`` opens (added or existing entries).

    ``seen`` holds each manifest's files once read: manifests are immutable
    and most are shared by many snapshots.
    """
    files = []
    for manifest in snapshot.manifests(table.io):
        if manifest.manifest_path not in seen:
            seen[manifest.manifest_path] = [entry.data_file.file_path for entry in
                                            manifest.fetch_manifest_entry(table.io, discard_deleted=True)]
        files += seen[manifest.manifest_path]
    return sorted(files)


def _stage_table(name: str, location: str, places: _Locations, seen: dict[str, list[str]]) -> dict[str, Any]:
    """Copy one table's reachable files into staging, its metadata rewritten for the new warehouse."""
    if not location.endswith(".metadata.json") or location.endswith(".gz.metadata.json"):
        raise MigrationError(f"table {name}: {location} is not an uncompressed metadata file; nothing was changed")
    try:
        table = StaticTable.from_metadata(location)
        lengths: dict[str, int] = {}
        data: set[str] = set()
        for snapshot in table.snapshots():
            if not snapshot.manifest_list:
                raise MigrationError(f"table {name}: snapshot {snapshot.snapshot_id} has no manifest list "
                                     f"(format v1); nothing was changed")
            for manifest in snapshot.manifests(table.io):
                if manifest.manifest_path not in lengths:
                    lengths[manifest.manifest_path] = rewrite_avro(table.io, manifest.manifest_path, places,
                                                                    relocate_data_files(places))
            data.update(_live_data_files(table, snapshot, seen))
            rewrite_avro(table.io, snapshot.manifest_list, places, relocate_manifests(places, lengths))
        copied = 0
        for uri in sorted(data):
            target = places.staged(uri)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(uri.removeprefix(FILE), target)
            copied += target.stat().st_size
        with table.io.new_input(location).open() as handle:
            metadata = json.loads(handle.read())
    except FileNotFoundError as exc:  # a concurrent commit pruned old metadata: read it again
        raise TransientError(f"table {name} changed under the migration; run it again: {exc}") from exc
    metadata["location"] = places.moved(metadata["location"])
    for snapshot in metadata.get("snapshots", []):
        snapshot["manifest-list"] = places.moved(snapshot["manifest-list"])
    metadata["metadata-log"] = []  # previous metadata files are not copied
    left = places.left_behind(metadata)
    if left:
        raise MigrationError(f"table {name}: its metadata names the old warehouse where migrate does not rewrite it "
                             f"({left[0]}); nothing was changed")
    staged = places.staged(location)
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_text(json.dumps(metadata))
    current = table.current_snapshot()
    return {"metadata_location": places.moved(location), "snapshots": len(table.snapshots()),
            "current_snapshot_id": current.snapshot_id if current else None, "data_files": len(data),
            "data_bytes": copied, "manifests": len(lengths)}


def _check_table(name: str, source_location: str, target_location: str, places: _Locations,
                 seen: dict[str, list[str]], target: AtlasmartHome) -> None:
    """The copied table has the source's snapshots, each with the same data files, all present, and its refs.

    The refs (the ``certified`` branch every engine reads, the version tags)
    and the table properties (the branch's index) are carried by the
    metadata JSON as they are: they name snapshot ids, which do not move.
    """
    properties = target.object_root.iceberg_properties() if target.object_root else {}
    source, copy = StaticTable.from_metadata(source_location), StaticTable.from_metadata(target_location, properties)

    def shape(table: StaticTable) -> dict[int, list[str]]:
        return {s.snapshot_id: _live_data_files(table, s, seen) for s in table.snapshots()}

    copied, original = shape(copy), shape(source)
    relative = {i: [places.relative(f, places.new) for f in files] for i, files in copied.items()}
    if relative != {i: [places.relative(f) for f in files] for i, files in original.items()} or (
            copy.metadata.current_snapshot_id != source.metadata.current_snapshot_id) or (
            {n: r.snapshot_id for n, r in copy.metadata.refs.items()}
            != {n: r.snapshot_id for n, r in source.metadata.refs.items()}):
        raise MigrationError(f"table {name}: the copy does not have the source's snapshots, files and refs; nothing was "
                             f"changed")
    present = target.objects.exists if target.objects is not None else (
        lambda uri: Path(uri.removeprefix(FILE)).is_file())
    missing = sorted({f for files in copied.values() for f in files if not present(f)})
    if missing:
        raise MigrationError(f"table {name}: copied data files are missing ({missing[0]}); nothing was changed")


# -- the migration --------------------------------------------------------------------
def _stage(source: AtlasmartHome, catalog: list[dict[str, Any]], places: _Locations, staging: Path,
           seen: dict[str, list[str]]) -> dict[str, Any]:
    tables = {row["table_name"]: _stage_table(row["table_name"], row["metadata_location"], places, seen)
              for row in catalog}
    batches = sorted(source.raw_dir.glob("sales_date=*/batch_id=*"))
    raw_bytes = 0
    for folder in batches:
        for path in sorted(folder.iterdir()):
            target = staging / "raw" / path.relative_to(source.raw_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)  # keeps the read-only mode of raw evidence
            raw_bytes += target.stat().st_size
    return {"tables": tables, "raw_batches": len(batches), "raw_bytes": raw_bytes}


def _copy_ledger(ledger: Ledger, rows: list[tuple[LedgerTable, list[dict[str, Any]]]]) -> dict[str, int]:
    """Append every row (inside the caller's transaction), move identity counters on, and read it all back."""
    engine = ledger.engine
    for table, table_rows in rows:
        for row in table_rows:
            engine.append(table, row)
        if table_rows and _IDENTITY_KEY.search(table.columns):
            # Rows keep their ids; the next append must continue after them.
            with engine.connect() as con, con.cursor() as cur:
                cur.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)",
                            (f"{LEDGER_SCHEMA}.{table.name}", max(r["id"] for r in table_rows)))
        if engine.select(table) != table_rows:
            raise MigrationError(f"the ledger table {table.name} reads back differently from the embedded ledger; "
                                 f"nothing was changed")
    return {table.name: len(table_rows) for table, table_rows in rows}


def _insert_catalog(ledger: Ledger, catalog: list[dict[str, Any]], tables: dict[str, dict]) -> None:
    """The catalog entries, pointing at the rewritten metadata, in the ledger's transaction (same database)."""
    with ledger.engine.connect() as con, con.cursor() as cur:
        for row in catalog:
            entry = {**row, "metadata_location": tables[row["table_name"]]["metadata_location"],
                     "previous_metadata_location": None}
            columns = ", ".join(entry)
            cur.execute(f"INSERT INTO iceberg_tables ({columns}) VALUES ({', '.join('%s' for _ in entry)})",
                        tuple(entry.values()))


def _place(staging: Path, target: AtlasmartHome, placed: list[Path]) -> None:
    """Rename the staged ``warehouse/`` and ``raw/`` into the shared folder (where only empty folders may be)."""
    for name, final in (("warehouse", target.warehouse_dir), ("raw", target.raw_dir)):
        (staging / name).mkdir(exist_ok=True)
        if final.exists():
            shutil.rmtree(final)  # only empty folders: checked under the ledger's write lock
        (staging / name).rename(final)
        placed.append(final)


def _put(staging: Path, target: AtlasmartHome, placed: list[str]) -> None:
    """Put the staged ``warehouse/`` and ``raw/`` under the target's prefix (which holds nothing: checked)."""
    objects = target.objects
    for name, prefix in (("warehouse", target.warehouse_uri), ("raw", target.raw_uri)):
        for path in sorted(p for p in (staging / name).rglob("*") if p.is_file()):
            url = f"{prefix}/{path.relative_to(staging / name).as_posix()}"
            if name == "raw":
                if not objects.put_once(url, path):
                    raise MigrationError(f"{url} appeared in the raw store during the migration; nothing was changed")
            else:
                objects.upload(path, url)
            placed.append(url)


def _shared_where(target: AtlasmartHome) -> str:
    return f"object store {target.object_root.where}" if target.object_root else f"shared folder {target.shared_root}"


def migrate_to_team(source: AtlasmartHome, target: AtlasmartHome) -> dict[str, Any]:
    """Copy the embedded home ``source`` into the empty team deployment ``target``, all or nothing.

    Returns what was copied: per table its new metadata location, snapshot
    count and current snapshot id, the raw batches, the ledger rows per table.
    """
    if source.team or not target.team:
        raise UsageError("migrate copies an embedded home into a team deployment")
    check_target_empty(target)
    ledger_rows = read_ledger(source)
    catalog = read_catalog(source)
    if target.shared_root is not None:
        target.shared_root.mkdir(parents=True, exist_ok=True)
        staging = target.shared_root / f".atlasmart-migration-{uuid.uuid4().hex[:12]}"
    else:  # an object store: staged on this machine (the embedded home is only read)
        staging = Path(tempfile.mkdtemp(prefix=".atlasmart-migration-"))
    places = _Locations(source, target, staging)
    placed: list = []  # folders placed, or on an object store the objects put
    seen: dict[str, list[str]] = {}  # data files per manifest, source and copy
    ledger = Ledger(target.database_url)
    try:
        staged = _stage(source, catalog, places, staging, seen)
        catalog_engine = Warehouse(target).catalog.engine  # creates the catalog's tables, as first use does
        catalog_engine.dispose()
        with ledger.transaction():
            with ledger.engine.connect() as con, con.cursor() as cur:
                found = _occupied_database(cur) + _occupied_folder(target)
            if found:  # a second migrate raced this one
                raise _refusal(target, found)
            copied_rows = _copy_ledger(ledger, ledger_rows)
            _insert_catalog(ledger, catalog, staged["tables"])
            if target.objects is not None:
                _put(staging, target, placed)
            else:
                _place(staging, target, placed)
            for row in catalog:
                _check_table(row["table_name"], row["metadata_location"],
                             staged["tables"][row["table_name"]]["metadata_location"], places, seen, target)
    except BaseException as exc:
        for done in placed:
            if target.objects is not None:
                target.objects.delete(done)
            else:
                shutil.rmtree(done, ignore_errors=True)
                done.mkdir(exist_ok=True)
        if isinstance(exc, AtlasmartError) or not isinstance(exc, Exception):
            raise
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MigrationError(f"the migration stopped ({type(exc).__name__}: {reason}); the team deployment was left "
                             f"as it was and the embedded home is untouched") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        ledger.close()
    return {
        "source": str(source.root),
        "database": redacted(target.database_url),
        "shared_folder": str(target.shared_root) if target.object_root is None else target.object_root.url,
        "tables": staged["tables"],
        "raw_batches": staged["raw_batches"],
        "raw_bytes": staged["raw_bytes"],
        "ledger_rows": copied_rows,
    }
