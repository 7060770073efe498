"""Backup: the committed state of an embedded home, copied while runs may be writing.

1. the ledger, with SQLite's online backup API (a consistent snapshot);
2. the Iceberg catalog, the same way; it is taken after the ledger, so every
   snapshot the ledger mentions was committed before and is in it;
3. every file reachable from the backed-up catalog: each table's metadata
   file, manifest lists, manifests and data files of every retained snapshot
   (so certified versions stay readable by time travel). A file being written
   by an in-flight commit is not reachable yet and is not copied;
4. the raw store's committed batches (write-once; the staging area is skipped).

A manifest lists every file with its SHA-256 (``restore.py`` checks each copy
against it). The ledger and the catalog both record the home's id
(``store/platform.py`` refuses a store that is missing or another home's), and
they are backed up and restored together, with one identity.

Backup and restore cover the embedded home; in the team deployment they are
refused (``TEAM_BACKUP``): the database is backed up with Postgres' own tools
and the shared folder with a filesystem snapshot. ``verify.py`` works in both.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyiceberg.table import StaticTable

from ...errors import AtlasmartError, TransientError
from ...store.clock import format_ts
from ...store.home import AtlasmartHome
from ...store.platform import Platform
from ...store.raw_store import sha256_file
from ...store.warehouse import reachable_files

BACKUP_FORMAT = 1
MANIFEST_KEYS = ("backup_id", "home", "ledger_sha256", "catalog_sha256", "files")
# What a backup holds of a home; everything else in it stays with the home across a restore.
# SQLite's side files go aside with their database: a journal or WAL left beside a restored
# file would be applied to it.
DATA_ENTRIES = ("catalog.db", "catalog.db-journal", "ledger.db", "ledger.db-journal", "ledger.db-wal",
                "ledger.db-shm", "warehouse", "raw")

# the restore's staging folder, copies a file (SQLite backups included) or
# renames a folder. Empty in production: tests register a hook raising OSError
# (ENOSPC, EROFS) to prove a full disk or a read-only file system leaves the
# home untouched (tests run as root, where chmod stops no write).
FILE_HOOKS: list[Callable[[Path, Path], None]] = []


TEAM_BACKUP = (
    "atlasmart backup and restore cover the embedded home only. In the team deployment back up the database "
    "(ledger and catalog) with pg_dump or point-in-time recovery, then take a filesystem snapshot of the shared "
    "folder {shared} (database first, so every file the catalog names is in the snapshot; no `atlasmart maintain` "
    "in between); restore both together, then run `atlasmart verify`"
)


class RecoveryError(AtlasmartError):
    """A backup is unusable, a restore could not complete, or a rollback target is wrong."""


def copy_file(source: Path, destination: Path) -> None:
    for hook in FILE_HOOKS:
        hook(source, destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, destination)


def rename(source: Path, destination: Path) -> None:
    for hook in FILE_HOOKS:
        hook(source, destination)
    source.rename(destination)


def os_reason(exc: BaseException) -> str:
    """One line saying what the operating system refused (``No space left on device``)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _sqlite_backup(source: Path, target: Path) -> None:
    for hook in FILE_HOOKS:
        hook(source, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(source, timeout=60)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def _tables_in(catalog_db: Path) -> dict[str, str]:
    con = sqlite3.connect(catalog_db)
    try:
        rows = con.execute("SELECT table_namespace, table_name, metadata_location FROM iceberg_tables").fetchall()
    finally:
        con.close()
    return {f"{ns}.{name}": location for ns, name, location in rows if location}


def backup(platform: Platform, destination: Path, label: str | None = None) -> dict[str, Any]:
    """Take a consistent backup of the home's committed state into ``destination/<id>``.

    It is written into a hidden ``.<id>.partial`` folder renamed into place at
    the end, so a failure (a full disk) leaves no half backup: the partial
    folder is removed and the error is one ``RecoveryError``. Refused in the team deployment.
    """
    if platform.home.team:
        raise RecoveryError(TEAM_BACKUP.format(shared=platform.home.shared_root))
    backup_id = label or platform.ledger.allocate_id("BK")
    target = Path(destination) / backup_id
    if target.exists():
        raise RecoveryError(f"backup {target} already exists")
    staging = Path(destination) / f".{backup_id}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        manifest = _write_backup(platform, backup_id, staging)
        staging.rename(target)
    except (OSError, sqlite3.Error) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise RecoveryError(f"backup {backup_id} into {destination} failed: {os_reason(exc)}; "
                            f"no partial backup was left") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest | {"path": str(target)}


def _write_backup(platform: Platform, backup_id: str, staging: Path) -> dict[str, Any]:
    home = platform.home
    with platform.ledger.engine.connect():
        pass  # the stores are checked (and an empty home's created, with its id) before they are copied
    _sqlite_backup(home.ledger_db, staging / "ledger.db")
    _sqlite_backup(home.catalog_db, staging / "catalog.db")
    files: list[dict[str, Any]] = []
    tables = {}
    for name, location in _tables_in(staging / "catalog.db").items():
        try:
            table = StaticTable.from_metadata(location)
            reachable = reachable_files(table)
        except FileNotFoundError as exc:  # a concurrent commit pruned old metadata: take it again
            raise TransientError(f"table {name} changed under the backup; retry: {exc}") from exc
        snapshot = table.current_snapshot()
        tables[name] = {"metadata_location": location, "current_snapshot_id": snapshot.snapshot_id if snapshot else None,
                        "files": len(reachable)}
        for path in reachable:
            files.append(_copy_into(home, Path(path), staging))
    for batch_folder in sorted(home.raw_dir.glob("sales_date=*/batch_id=*")):
        for path in sorted(batch_folder.iterdir()):
            files.append(_copy_into(home, path, staging))
    manifest = {
        "format": BACKUP_FORMAT,
        "backup_id": backup_id,
        "created_at": format_ts(platform.clock.now()),
        "home": str(home.root),
        # The id the backed-up ledger and catalog both record: a restore brings them back together.
        "home_id": platform.identity.home_id,
        "tables": tables,
        "ledger_sha256": sha256_file(staging / "ledger.db"),
        "catalog_sha256": sha256_file(staging / "catalog.db"),
        "files": files,
    }
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


def _copy_into(home: AtlasmartHome, path: Path, staging: Path) -> dict[str, Any]:
    relative = path.resolve().relative_to(home.root)
    destination = staging / "files" / relative
    copy_file(path, destination)
    return {"path": str(relative), "sha256": sha256_file(destination), "bytes": destination.stat().st_size}


def expected_hashes(manifest: dict[str, Any]) -> dict[str, str]:
    """Every file of a backup, relative to the backup folder, with its SHA-256."""
    expected = {"ledger.db": manifest["ledger_sha256"], "catalog.db": manifest["catalog_sha256"]}
    expected.update({f"files/{f['path']}": f["sha256"] for f in manifest["files"]})
    return expected


def load_complete_backup(backup_dir: Path) -> dict[str, Any]:
    """The backup's manifest, once every file it lists is known to exist (no file is read yet)."""
    manifest_path = Path(backup_dir) / "manifest.json"
    if not manifest_path.is_file():
        raise RecoveryError(f"{backup_dir} is not a backup (no manifest.json)")
    try:
        manifest = json.loads(manifest_path.read_text())
    except ValueError as exc:
        raise RecoveryError(f"{manifest_path} is not a backup manifest: not valid JSON ({exc})") from None
    absent = [k for k in MANIFEST_KEYS if k not in manifest] if isinstance(manifest, dict) else list(MANIFEST_KEYS)
    if absent:
        raise RecoveryError(f"{manifest_path} is not a backup manifest: it lacks {', '.join(absent)}")
    expected = expected_hashes(manifest)
    missing = [name for name in expected if not (Path(backup_dir) / name).is_file()]
    if missing:
        raise RecoveryError(f"backup {manifest['backup_id']} at {backup_dir} is incomplete: {len(missing)} "
                            f"file{'s' if len(missing) > 1 else ''} missing ({', '.join(missing[:5])}); "
                            f"nothing was restored")
    return manifest


