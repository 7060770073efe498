"""Backup, restore, verify and partition rollback: disaster recovery that has actually restored data.

**Backup** copies the *committed* state only, while runs may be writing:

1. the ledger, with SQLite's online backup API (a consistent snapshot);
2. the Iceberg catalog, the same way; it is taken after the ledger, so every
   snapshot the ledger mentions was committed before and is in it;
3. every file reachable from the backed-up catalog: each table's metadata
   file, manifest lists, manifests and data files of every retained snapshot
   (so certified versions stay readable by time travel). A file being written
   by an in-flight commit is not reachable yet and is not copied;
4. the raw store's committed batches (write-once; the staging area is skipped).

A manifest lists every file with its SHA-256. **Restore** checks those
checksums first, moves whatever is in the home aside (a damaged home is
evidence, never deleted), copies the backup back and runs **verify**, which
recomputes the controls and fingerprints of every certified partition and
compares them with the ledger, checks the raw evidence against its hashes,
and checks that every layer reconciles with controls recomputed from raw.

Iceberg metadata holds absolute file paths, so a backup restores into the
home path it was taken from.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

from pyiceberg.table import StaticTable

from ..domain.controls import ControlTuple, total
from ..errors import AtlasmartError, TransientError
from ..product.canonical_controls import verify_partitions
from ..product.fingerprints import fingerprint_relation
from ..product.published_controls import controls_of, fingerprints_of
from ..store.clock import format_ts
from ..store.home import AtlasmartHome
from ..store.ledger.partition_states import BUILT
from ..store.platform import Platform
from ..store.raw_store import sha256_file
from ..store.tables import CERTIFIED_ASSETS, FACT_SALES, TABLES_BY_NAME
from ..store.warehouse import duckdb_connection, reachable_files

BACKUP_FORMAT = 1


class RecoveryError(AtlasmartError):
    """A backup is unusable, or a restore target is wrong."""


def _sqlite_backup(source: Path, target: Path) -> None:
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
    """Take a consistent backup of the home's committed state into ``destination/<id>``."""
    home = platform.home
    backup_id = label or platform.ledger.allocate_id("BK")
    target = Path(destination) / backup_id
    if target.exists():
        raise RecoveryError(f"backup {target} already exists")
    staging = Path(destination) / f".{backup_id}.partial"
    shutil.rmtree(staging, ignore_errors=True)
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
        "tables": tables,
        "ledger_sha256": sha256_file(staging / "ledger.db"),
        "catalog_sha256": sha256_file(staging / "catalog.db"),
        "files": files,
    }
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    staging.rename(target)
    return manifest | {"path": str(target)}


def _copy_into(home: AtlasmartHome, path: Path, staging: Path) -> dict[str, Any]:
    relative = path.resolve().relative_to(home.root)
    destination = staging / "files" / relative
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, destination)
    return {"path": str(relative), "sha256": sha256_file(destination), "bytes": destination.stat().st_size}


def check_backup(backup_dir: Path) -> dict[str, Any]:
    """Load a backup's manifest and prove every file is intact."""
    manifest_path = Path(backup_dir) / "manifest.json"
    if not manifest_path.exists():
        raise RecoveryError(f"{backup_dir} is not a backup (no manifest.json)")
    manifest = json.loads(manifest_path.read_text())
    bad = [f["path"] for f in manifest["files"] if sha256_file(Path(backup_dir) / "files" / f["path"]) != f["sha256"]]
    for name in ("ledger", "catalog"):
        if sha256_file(Path(backup_dir) / f"{name}.db") != manifest[f"{name}_sha256"]:
            bad.append(f"{name}.db")
    if bad:
        raise RecoveryError(f"backup {manifest['backup_id']} is corrupt: {len(bad)} files fail their checksum "
                            f"({', '.join(bad[:5])})")
    return manifest


def restore(backup_dir: Path, home: AtlasmartHome, at: datetime) -> dict[str, Any]:
    """Restore a checked backup into its home; whatever was there is moved aside, not deleted."""
    manifest = check_backup(backup_dir)
    if Path(manifest["home"]) != home.root:
        raise RecoveryError(
            f"backup {manifest['backup_id']} belongs to home {manifest['home']}: Iceberg metadata holds absolute "
            f"paths, so it restores there (not into {home.root})"
        )
    home.root.mkdir(parents=True, exist_ok=True)
    aside = home.root / f".damaged-{at.strftime('%Y%m%dT%H%M%S')}"
    moved = []
    for name in ("catalog.db", "ledger.db", "ledger.db-wal", "ledger.db-shm", "warehouse", "raw"):
        if (home.root / name).exists():
            aside.mkdir(parents=True, exist_ok=True)
            (home.root / name).rename(aside / name)
            moved.append(name)
    shutil.copyfile(Path(backup_dir) / "catalog.db", home.catalog_db)
    shutil.copyfile(Path(backup_dir) / "ledger.db", home.ledger_db)
    for item in manifest["files"]:
        destination = home.root / item["path"]
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(backup_dir) / "files" / item["path"], destination)
        if destination.is_relative_to(home.raw_dir):
            destination.chmod(0o444)
    return {"backup_id": manifest["backup_id"], "restored_files": len(manifest["files"]),
            "moved_aside": moved, "aside": str(aside) if moved else None}


def verify(platform: Platform) -> dict[str, Any]:
    """Recompute and compare everything the ledger vouches for.

    Three kinds of problems: ``certified`` (a served version no longer has the
    certified fingerprint or controls, or cannot be read), ``raw`` (raw
    evidence missing or changed) and ``layers`` (a layer disagrees with the
    controls recomputed from raw, e.g. after an interrupted run; consumers are
    still served certified versions, but the day needs a re-run).
    ``certified_ok`` is what consumers rely on; ``ok`` means everything agrees.
    """
    ledger, wh = platform.ledger, platform.warehouse
    problems: dict[str, list[str]] = {"certified": [], "raw": [], "layers": []}
    checked = {"certified_partitions": 0, "raw_batches": 0, "days": 0}
    for asset in CERTIFIED_ASSETS:
        spec = TABLES_BY_NAME[asset]
        for partition, served in sorted(ledger.partitions.served_map(asset).items()):
            cert = served.certification
            checked["certified_partitions"] += 1
            try:
                fingerprint = fingerprints_of(wh, spec, [partition], cert.snapshot_id)[partition]
            except Exception as exc:  # noqa: BLE001 - a missing snapshot or file is exactly what verify reports
                problems["certified"].append(
                    f"{asset} {partition}: certified snapshot unreadable ({type(exc).__name__}: {exc})")
                continue
            if fingerprint != cert.fingerprint:
                problems["certified"].append(f"{asset} {partition}: fingerprint {fingerprint[:12]}… differs from "
                                             f"certified {cert.fingerprint[:12]}…")
            if spec != TABLES_BY_NAME["metric_gross_revenue"] and cert.controls is not None:
                controls = controls_of(wh, spec, [partition], cert.snapshot_id)[partition]
                if controls != cert.controls:
                    problems["certified"].append(
                        f"{asset} {partition}: controls {controls} differ from certified {cert.controls}")
    batches = ledger.batches.list()
    for batch in batches:
        checked["raw_batches"] += 1
        stored = platform.raw_store.get(batch["partition"], batch["batch_id"])
        if stored is None:
            problems["raw"].append(f"raw batch {batch['batch_id']} is missing from the raw store")
        elif sha256_file(stored.data_path) != batch["data_sha256"]:
            problems["raw"].append(f"raw batch {batch['batch_id']} no longer hashes to its manifest's data_sha256")
    days = sorted({b["partition"] for b in batches})
    checked["days"] = len(days)
    if days:
        chain = verify_partitions(platform, days)
        for day, result in chain["per_day"].items():
            if result["mismatches"]:
                problems["layers"].append(f"{day}: {', '.join(result['mismatches'])} disagree with controls "
                                          f"recomputed from raw {result['canonical']}")
    flat = [p for kind in ("certified", "raw", "layers") for p in problems[kind]]
    return {
        "ok": not flat,
        "certified_ok": not problems["certified"] and not problems["raw"],
        "problems": flat,
        "by_kind": problems,
        "checked": checked,
    }


def fact_rows_sha256(platform: Platform) -> str:
    """SHA-256 of every fact row, in canonical order (the DR drill's before/after proof)."""
    con = duckdb_connection()
    try:
        view = platform.warehouse.register(con, FACT_SALES, name="dr_fact")
        return fingerprint_relation(con, view, ("sales_date",) + FACT_SALES.grain)
    finally:
        con.close()


def total_fact_controls(platform: Platform) -> ControlTuple:
    days = sorted({b["partition"] for b in platform.ledger.batches.list()})
    return total(controls_of(platform.warehouse, FACT_SALES, days).values())


def rollback_partition(platform: Platform, asset: str, partition: str, actor: str, reason: str) -> dict[str, Any]:
    """Put one partition of one table back to the version its last certification was built on.

    Iceberg rollback moves a whole table; for one day we write the rows of
    that day as they were at the pinned snapshot as a new snapshot (copy
    forward). Other days are untouched.
    """
    spec = TABLES_BY_NAME[asset]
    pinned = _pinned_snapshot(platform, asset, partition)
    if pinned is None:
        raise RecoveryError(f"{asset} {partition} has no certified version to roll back to")
    rows = platform.warehouse.read(spec, [partition], pinned)
    snapshot_id = platform.warehouse.overwrite(
        spec, rows, [partition], {"run_id": f"rollback:{actor}", "rolled_back_to": str(pinned), "reason": reason}
    )
    platform.ledger.partitions.append(asset, partition, "ROLLED_BACK", platform.clock.now(), actor=actor,
                                 snapshot_id=snapshot_id, reason=reason, detail={"to_snapshot_id": pinned,
                                                                                   "rows": rows.num_rows})
    return {"asset": asset, "partition": partition, "rows": rows.num_rows, "to_snapshot_id": pinned,
            "new_snapshot_id": snapshot_id}


def _pinned_snapshot(platform: Platform, asset: str, partition: str) -> int | None:
    """The snapshot of ``asset`` the day's served certification was built on."""
    ledger = platform.ledger
    if asset in CERTIFIED_ASSETS:
        mine = ledger.partitions.served(asset, partition)
        return mine.certification.snapshot_id if mine else None
    served = ledger.partitions.served("mart_finance_daily_sales", partition) or ledger.partitions.served("metric_gross_revenue", partition)
    if served is None:
        return None
    built_id = served.certification.detail.get("built_event_id")
    candidates = [e for e in ledger.partitions.events(asset=asset, partition=partition, states=(BUILT,)) if e.id <= built_id]
    return candidates[-1].snapshot_id if candidates else None

