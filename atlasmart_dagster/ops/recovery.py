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

A manifest lists every file with its SHA-256. **Restore** is all or nothing:
a backup missing a file is refused before anything is touched; the backup is
copied into a new folder next to the home and every copy is checked against
its SHA-256 there; only then is the current home renamed aside (a damaged
home is evidence, never deleted) and the staged folder renamed into its
place. A failure before that swap (a corrupt backup, a full disk, a read-only
file system) removes the staging folder and leaves the home untouched. What
is not the product's data (the Dagster instance, the clock, artifacts, locks)
stays with the home. The ledger and the catalog both record the home's id
(``store/platform.py`` refuses a store that is missing or another home's),
and they are backed up and restored together: a restore is how a lost
``catalog.db``, ``ledger.db`` or raw store comes back, with one identity.
**Verify** recomputes the controls and fingerprints of
every certified partition and compares them with the ledger, checks the raw
evidence against its hashes, and checks that every layer reconciles with
controls recomputed from raw; a file it cannot read or a sum that overflows
is a finding about that partition, never a crash.

Iceberg metadata holds absolute file paths, so a backup restores as it is
into the home path it was taken from; ``restore(..., relocate=True)``
(``atlasmart restore BACKUP --relocate``) restores it at another path, its
tables' metadata rewritten for that path in the staging folder before the
swap (``ops/relocation.py``).

Backup and restore cover the embedded home; in the team deployment they are
refused (``TEAM_BACKUP``): the database is backed up with Postgres' own tools
and the shared folder with a filesystem snapshot. Verify works in both.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from datetime import date, datetime
from pathlib import Path
from typing import Any, Callable

import duckdb
from pyiceberg.table import StaticTable

from ..domain.controls import ControlTuple, total
from ..errors import AtlasmartError, TransientError
from ..product.canonical_controls import canonical_controls, verify_partitions
from ..product.fingerprints import fingerprint_relation
from ..product.published_controls import controls_of, fingerprints_of, metric_revenue_of
from ..store.clock import format_ts
from ..store.home import AtlasmartHome
from ..store.ledger.partition_states import BUILT
from ..store.platform import Platform
from ..store.raw_store import sha256_file
from ..store.tables import (
    CERTIFIED_ASSETS,
    CONTROL_TUPLE,
    FACT_SALES,
    METRIC_GROSS_REVENUE,
    RAW_ORDER_LINES,
    REGISTRY,
    TABLES_BY_NAME,
    TableSpec,
)
from ..store.warehouse import Warehouse, duckdb_connection, reachable_files

BACKUP_FORMAT = 1
MANIFEST_KEYS = ("backup_id", "home", "ledger_sha256", "catalog_sha256", "files")
# What a backup holds of a home; everything else in it stays with the home across a restore.
# SQLite's side files go aside with their database: a journal or WAL left beside a restored
# file would be applied to it.
DATA_ENTRIES = ("catalog.db", "catalog.db-journal", "ledger.db", "ledger.db-journal", "ledger.db-wal",
                "ledger.db-shm", "warehouse", "raw")
# Tables a partition can be rolled back: the certified ones, and the builds a
# certification pins (maintenance keeps exactly those snapshots, so the
# version to roll back to is still there).
ROLLBACK_ASSETS = REGISTRY.names(lambda s: s.certified or s.pinned)


def layer_tables() -> list[TableSpec]:
    """Every table ``verify`` reads for a day's reconciliation, in the order the chain builds them."""
    return REGISTRY.specs(lambda s: s is RAW_ORDER_LINES or s.controls is not None)


# Called with (source, destination) before backup or restore writes: creates
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


def _copy_file(source: Path, destination: Path) -> None:
    for hook in FILE_HOOKS:
        hook(source, destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, destination)


def _rename(source: Path, destination: Path) -> None:
    for hook in FILE_HOOKS:
        hook(source, destination)
    source.rename(destination)


def _os_reason(exc: BaseException) -> str:
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
        raise RecoveryError(f"backup {backup_id} into {destination} failed: {_os_reason(exc)}; "
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
    _copy_file(path, destination)
    return {"path": str(relative), "sha256": sha256_file(destination), "bytes": destination.stat().st_size}


def _expected(manifest: dict[str, Any]) -> dict[str, str]:
    """Every file of a backup, relative to the backup folder, with its SHA-256."""
    expected = {"ledger.db": manifest["ledger_sha256"], "catalog.db": manifest["catalog_sha256"]}
    expected.update({f"files/{f['path']}": f["sha256"] for f in manifest["files"]})
    return expected


def _load_complete_backup(backup_dir: Path) -> dict[str, Any]:
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
    expected = _expected(manifest)
    missing = [name for name in expected if not (Path(backup_dir) / name).is_file()]
    if missing:
        raise RecoveryError(f"backup {manifest['backup_id']} at {backup_dir} is incomplete: {len(missing)} "
                            f"file{'s' if len(missing) > 1 else ''} missing ({', '.join(missing[:5])}); "
                            f"nothing was restored")
    return manifest


def _free_path(path: Path) -> Path:
    """``path``, or ``path-2``, ``path-3``… : the first name nothing uses yet."""
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}-{n}")
    return candidate


def restore(backup_dir: Path, home: AtlasmartHome, at: datetime, relocate: bool = False) -> dict[str, Any]:
    """Restore a backup into its home, all or nothing; the previous home is kept beside it, not deleted.

    Order: refuse a backup missing a file; copy it into a staging folder next
    to the home and check every checksum there; rename the home aside
    (``<home>.damaged-<time>``); rename the staging folder into place; move
    what is not the product's data (Dagster instance, clock, artifacts) back
    into the new home. A backup taken at another path is refused unless
    ``relocate``: then the staged copy's metadata is rewritten for this path
    after its checksums are proved, before the swap. Any failure before the swap removes the staging folder
    and leaves the home untouched; a failed swap puts the home back. Refused in the team deployment.
    """
    if home.team:
        raise RecoveryError(TEAM_BACKUP.format(shared=home.shared_root))
    backup_dir = Path(backup_dir)
    manifest = _load_complete_backup(backup_dir)
    backup_id = manifest["backup_id"]
    taken_at = Path(manifest["home"])
    if taken_at != home.root and not relocate:
        raise RecoveryError(
            f"backup {backup_id} belongs to home {manifest['home']}: Iceberg metadata holds absolute "
            f"paths, so it restores there as it is; to restore it into {home.root}, run "
            f"`atlasmart restore {backup_dir} --relocate` (its metadata is rewritten for this path)"
        )
    stamp = at.strftime("%Y%m%dT%H%M%S")
    staging = _free_path(home.root.parent / f".{home.root.name}.restoring-{stamp}")
    try:
        _stage(backup_dir, manifest, home, staging)
        if taken_at != home.root:
            from .relocation import relocate_files  # local: only a relocating restore needs it

            relocate_files(staging, taken_at, home.root)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)  # whatever stopped it, no half-staged folder stays behind
        if isinstance(exc, OSError):
            raise RecoveryError(f"restore of backup {backup_id} stopped while staging it in {staging}: "
                                f"{_os_reason(exc)}; the home {home.root} is untouched") from exc
        raise
    aside = _swap(home.root, staging, home.root.parent / f"{home.root.name}.damaged-{stamp}", backup_id)
    moved, carried, left = [], [], []
    if aside is not None:
        for name in ("warehouse", "raw"):
            if (aside / name).is_dir() and not any((aside / name).iterdir()):
                (aside / name).rmdir()  # an empty folder (opening a home creates them) is no evidence
        moved = sorted(p.name for p in aside.iterdir() if p.name in DATA_ENTRIES)
        for entry in sorted(aside.iterdir()):
            if entry.name in DATA_ENTRIES:
                continue
            try:
                _rename(entry, home.root / entry.name)
                carried.append(entry.name)
            except OSError:
                left.append(entry.name)  # the data is restored; this stays in the aside folder, reported
        if not moved and not left:
            aside.rmdir()  # the home held none of the product's data: nothing to keep as evidence
            aside = None
    return {"backup_id": backup_id, "home_id": manifest.get("home_id"), "restored_files": len(manifest["files"]),
            "relocated_from": str(taken_at) if taken_at != home.root else None, "moved_aside": moved, "aside": str(aside) if aside else None, "carried_over": carried, "left_aside": left}


def _stage(backup_dir: Path, manifest: dict[str, Any], home: AtlasmartHome, staging: Path) -> None:
    """Copy the backup into ``staging`` laid out as a home, and prove every copy against its checksum."""
    for hook in FILE_HOOKS:
        hook(backup_dir, staging)
    staging.mkdir(parents=True)
    layout = {name: name.removeprefix("files/") for name in _expected(manifest)}
    for name, target in layout.items():
        _copy_file(backup_dir / name, staging / target)
    bad = [name for name, sha in _expected(manifest).items() if sha256_file(staging / layout[name]) != sha]
    if bad:
        raise RecoveryError(f"backup {manifest['backup_id']} is corrupt: {len(bad)} file{'s' if len(bad) > 1 else ''} "
                            f"fail their checksum ({', '.join(bad[:5])}); the home {home.root} is untouched")
    for target in layout.values():
        if target.startswith("raw/"):
            (staging / target).chmod(0o444)  # raw evidence is write-once


def _swap(root: Path, staged: Path, aside_name: Path, backup_id: str) -> Path | None:
    """Rename ``root`` aside and ``staged`` into its place; on failure the home is put back. Returns the aside folder."""
    aside = _free_path(aside_name) if root.exists() else None
    try:
        if aside is not None:
            _rename(root, aside)
    except OSError as exc:
        shutil.rmtree(staged, ignore_errors=True)
        raise RecoveryError(f"restore of backup {backup_id} could not move the home {root} aside: "
                            f"{_os_reason(exc)}; the home is untouched") from exc
    try:
        _rename(staged, root)
    except OSError as exc:
        reason = _os_reason(exc)
        if aside is not None:
            try:
                _rename(aside, root)
            except OSError:
                raise RecoveryError(
                    f"restore of backup {backup_id} could not move the restored home into {root} ({reason}) nor put "
                    f"the previous home back: the previous home is at {aside} and the verified restore at "
                    f"{staged}; rename one of them to {root}") from exc
        shutil.rmtree(staged, ignore_errors=True)
        raise RecoveryError(f"restore of backup {backup_id} could not move the restored home into {root}: "
                            f"{reason}; the home is untouched") from exc
    return aside


def _finding(scope: str, kind: str, asset: str | None, partition: str | None, message: str) -> dict[str, Any]:
    return {"scope": scope, "kind": kind, "asset": asset, "partition": partition, "message": message}


def _read_failure(exc: BaseException) -> tuple[str, str]:
    """(kind, one-line reason) of an exception raised while reading a partition."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    lowered = text.lower()
    if isinstance(exc, duckdb.ConversionException | duckdb.OutOfRangeException) and (
            "out of range" in lowered or "overflow" in lowered):
        return "overflow", f"its sums overflow: {text}"
    if isinstance(exc, FileNotFoundError) or (isinstance(exc, duckdb.IOException) and "no files found" in lowered):
        return "missing_file", f"a file is missing: {text}"
    return "unreadable", f"unreadable ({type(exc).__name__}: {text})"


def _stored_batch(platform: Platform, batch: dict):
    """The raw store's batch, or None when it is gone (on an object store, a data file lost from the bucket)."""
    try:
        return platform.raw_store.get(batch["partition"], batch["batch_id"])
    except FileNotFoundError:
        return None


def _missing_files(wh: Warehouse, spec: TableSpec, partition: str, snapshot_id: int | None) -> list[str]:
    """Data files of one partition at a snapshot that are not on disk, relative to the home (or shared folder)."""
    files = wh.data_files(spec, [partition], snapshot_id)
    if wh.objects is not None:
        return [f for f in files if not wh.objects.exists(f)]
    root = wh.home.data_root
    return [str(Path(f).relative_to(root)) if Path(f).is_relative_to(root) else f
            for f in files if not Path(f).exists()]


def _check_certified(wh: Warehouse, spec: TableSpec, partition: str, cert) -> list[dict[str, Any]]:
    """What is wrong with one certified partition: unreadable, or not what was certified."""
    where = f"{spec.name} {partition}"

    def found(kind: str, message: str) -> list[dict[str, Any]]:
        return [_finding("certified", kind, spec.name, partition, f"{where}: {message}")]

    try:
        table = wh.existing(spec)
        if cert.snapshot_id is not None and (table is None or table.snapshot_by_id(cert.snapshot_id) is None):
            return found("snapshot_missing", f"certified snapshot {cert.snapshot_id} is no longer in the table")
        missing = _missing_files(wh, spec, partition, cert.snapshot_id)
        if missing:
            return found("missing_file", f"certified version unreadable: file{'s' if len(missing) > 1 else ''} "
                                         f"missing ({', '.join(missing)})")
        fingerprint = fingerprints_of(wh, spec, [partition], cert.snapshot_id)[partition]
        controls = None
        if spec != METRIC_GROSS_REVENUE and cert.controls is not None:
            controls = controls_of(wh, spec, [partition], cert.snapshot_id)[partition]
    except Exception as exc:  # noqa: BLE001 - whatever stops the read is exactly what verify reports
        kind, reason = _read_failure(exc)
        return found(kind, f"certified version {reason}")
    out = []
    if fingerprint != cert.fingerprint:
        out += found("fingerprint", f"fingerprint {fingerprint[:12]}… differs from certified {cert.fingerprint[:12]}…")
    if controls is not None and controls != cert.controls:
        out += found("controls", f"controls {controls} differ from certified {cert.controls}")
    return out


def _layer_probes(platform: Platform) -> list[tuple[str, Callable[[str], Any]]]:
    """One reader per table a day's reconciliation reads, to find which one fails."""
    wh = platform.warehouse
    probes: list[tuple[str, Callable[[str], Any]]] = [(RAW_ORDER_LINES.name, lambda d: canonical_controls(platform, [d]))]
    for spec in REGISTRY.specs(lambda s: s.controls == CONTROL_TUPLE):
        probes.append((spec.name, lambda d, spec=spec: controls_of(wh, spec, [d])))
    probes.append((METRIC_GROSS_REVENUE.name, lambda d: metric_revenue_of(wh, [d])))
    return probes


def _check_layers(platform: Platform, days: list[str]) -> list[dict[str, Any]]:
    """Findings of every day's reconciliation with raw; a day that cannot be read is a finding, not a crash."""
    findings, readable = [], []
    for day in days:
        missing = []
        for spec in layer_tables():
            try:
                files = _missing_files(platform.warehouse, spec, day, None)
            except Exception as exc:  # noqa: BLE001 - e.g. a manifest of the table is gone
                kind, reason = _read_failure(exc)
                missing.append(_finding("layers", kind, spec.name, day, f"{day}: {spec.name} {reason}"))
                continue
            if files:
                missing.append(_finding("layers", "missing_file", spec.name, day,
                                        f"{day}: {spec.name} unreadable: missing {', '.join(files)}"))
        findings += missing
        if not missing:
            readable.append(day)
    if not readable:
        return findings
    try:
        per_day = verify_partitions(platform, readable)["per_day"]
    except Exception:  # noqa: BLE001 - one bad day must not hide the others: reconcile day by day
        per_day = {}
        for day in readable:
            try:
                per_day[day] = verify_partitions(platform, [day])["per_day"][day]
            except Exception as exc:  # noqa: BLE001 - reported below, with the table that fails
                findings.append(_unreadable_day(platform, day, exc))
    for day, result in sorted(per_day.items()):
        if result["mismatches"]:
            tables = [m for m in result["mismatches"] if m in TABLES_BY_NAME]
            findings.append(_finding("layers", "mismatch", ", ".join(tables) or None, day,
                                     f"{day}: {', '.join(result['mismatches'])} disagree with controls "
                                     f"recomputed from raw {result['canonical']}"))
    return sorted(findings, key=lambda f: f["partition"])


def _unreadable_day(platform: Platform, day: str, exc: BaseException) -> dict[str, Any]:
    """The finding for a day whose reconciliation raised: which table, and why."""
    asset, cause = None, exc
    for name, probe in _layer_probes(platform):
        try:
            probe(day)
        except Exception as probe_exc:  # noqa: BLE001 - the first table that cannot be read is the culprit
            asset, cause = name, probe_exc
            break
    kind, reason = _read_failure(cause)
    return _finding("layers", kind, asset, day, f"{day}: {asset or 'reconciliation'} {reason}")


def _never_built(platform: Platform, days: list[str]) -> list[dict[str, Any]]:
    """Days loaded to raw that no later layer was ever built for, and that no later layer holds rows of.

    A batch refused at the contract gate (or a run stopped before staging)
    publishes nothing after raw: there is nothing to reconcile, so such a day
    is reported as not built rather than as a mismatch. A day any later layer
    was built for, or holds rows of, is reconciled as usual.
    """
    built = {e.partition for e in platform.ledger.partitions.events(states=(BUILT,), partitions=days)
             if e.asset != RAW_ORDER_LINES.name}
    candidates = [d for d in days if d not in built]
    if not candidates:
        return []
    held = [platform.warehouse.partition_row_counts(spec, candidates) for spec in layer_tables() if spec != RAW_ORDER_LINES]
    return [_finding("layers", "not_built", None, day, f"{day}: loaded to raw but never built (refused before "
                     "staging, e.g. at the contract gate): nothing after raw to reconcile")
            for day in candidates if not any(counts[day] for counts in held)]


def verify(platform: Platform) -> dict[str, Any]:
    """Recompute and compare everything the ledger vouches for; report, never crash, per partition.

    Every finding is ``{scope, kind, asset, partition, message}``. Scopes:
    ``certified`` (a served version no longer has the certified fingerprint
    or controls, or cannot be read), ``raw`` (raw evidence missing or
    changed) and ``layers`` (a layer disagrees with the controls recomputed
    from raw, e.g. after an interrupted run, or cannot be read; consumers are
    still served certified versions, but the day needs a re-run). Kinds say
    what was found: ``missing_file``, ``snapshot_missing``, ``overflow``,
    ``unreadable``, ``fingerprint``, ``controls``, ``mismatch``,
    ``raw_missing``, ``raw_changed``. A day loaded to raw but never built
    after it (refused at the contract gate) is listed in ``not_built``, not
    in the findings. ``certified_ok`` is what consumers
    rely on; ``ok`` means everything agrees. ``problems`` and ``by_kind``
    (per scope) hold the same messages.
    """
    ledger, wh = platform.ledger, platform.warehouse
    findings: list[dict[str, Any]] = []
    checked = {"certified_partitions": 0, "raw_batches": 0, "days": 0}
    for asset in CERTIFIED_ASSETS:
        spec = TABLES_BY_NAME[asset]
        for partition, served in sorted(ledger.partitions.served_map(asset).items()):
            checked["certified_partitions"] += 1
            findings += _check_certified(wh, spec, partition, served.certification)
    batches = ledger.batches.list()
    for batch in batches:
        checked["raw_batches"] += 1
        stored = _stored_batch(platform, batch)
        found_sha = platform.raw_store.stored_sha256(stored) if stored is not None else None
        if found_sha is None:
            findings.append(_finding("raw", "raw_missing", RAW_ORDER_LINES.name, batch["partition"],
                                     f"raw batch {batch['batch_id']} is missing from the raw store"))
        elif found_sha != batch["data_sha256"]:
            findings.append(_finding("raw", "raw_changed", RAW_ORDER_LINES.name, batch["partition"],
                                     f"raw batch {batch['batch_id']} no longer hashes to its manifest's data_sha256"))
    days = sorted({b["partition"] for b in batches})
    checked["days"] = len(days)
    not_built = _never_built(platform, days)
    findings += _check_layers(platform, [d for d in days if d not in {n["partition"] for n in not_built}])
    by_kind = {scope: [f["message"] for f in findings if f["scope"] == scope] for scope in ("certified", "raw", "layers")}
    return {
        "ok": not findings,
        "certified_ok": not by_kind["certified"] and not by_kind["raw"],
        "findings": findings,
        "problems": [f["message"] for f in findings],
        "by_kind": by_kind,
        "checked": checked,
        "not_built": not_built,  # days with nothing after raw to check: reported, never a failure
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


def _is_day(text: str) -> bool:
    """``YYYY-MM-DD`` and a real date (``fromisoformat`` alone also takes ``20260920``)."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _validate_rollback_target(asset: str, partition: str) -> None:
    if asset not in TABLES_BY_NAME:
        raise RecoveryError(f"unknown asset {asset!r}: roll back one of {', '.join(ROLLBACK_ASSETS)}")
    if asset not in ROLLBACK_ASSETS:
        raise RecoveryError(f"cannot roll back {asset}: no certification pins its versions; roll back one of "
                            f"{', '.join(ROLLBACK_ASSETS)}")
    if not _is_day(partition):
        raise RecoveryError(f"partition must be a day like 2026-09-20, not {partition!r}")


def rollback_partition(platform: Platform, asset: str, partition: str, actor: str, reason: str) -> dict[str, Any]:
    """Put one partition of one table back to the version its last certification was built on.

    Iceberg rollback moves a whole table; for one day we write the rows of
    that day as they were at the pinned snapshot as a new snapshot (copy
    forward). Other days are untouched. ``asset`` is one of
    ``ROLLBACK_ASSETS``; a version that can no longer be read is refused,
    never written back as an empty day.
    """
    _validate_rollback_target(asset, partition)
    spec = TABLES_BY_NAME[asset]
    pinned = _pinned_snapshot(platform, asset, partition)
    if pinned is None:
        raise RecoveryError(f"{asset} {partition} has no certified version to roll back to")
    table = platform.warehouse.existing(spec)
    if table is None or table.snapshot_by_id(pinned) is None:
        raise RecoveryError(f"{asset} {partition}: the certified version (snapshot {pinned}) is no longer in the "
                            f"table; restore a backup instead")
    try:
        missing = _missing_files(platform.warehouse, spec, partition, pinned)
        if missing:
            raise RecoveryError(f"{asset} {partition}: the certified version is unreadable, files missing "
                                f"({', '.join(missing)}); restore a backup instead")
        rows = platform.warehouse.read(spec, [partition], pinned)
    except RecoveryError:
        raise
    except Exception as exc:  # noqa: BLE001 - told in one line, and nothing is written
        raise RecoveryError(f"{asset} {partition}: the certified version is {_read_failure(exc)[1]}") from exc
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
    served = next(filter(None, (ledger.partitions.served(product, partition) for product in CERTIFIED_ASSETS)), None)
    if served is None:
        return None
    # As maintenance protects it: the newest build up to the one the certification was decided on.
    built_id = served.certification.detail.get("built_event_id") or served.certification.id
    candidates = [e for e in ledger.partitions.events(asset=asset, partition=partition, states=(BUILT,)) if e.id <= built_id]
    return candidates[-1].snapshot_id if candidates else None
