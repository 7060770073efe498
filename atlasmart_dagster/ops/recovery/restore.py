"""Restore: all or nothing, and a damaged home is evidence, never deleted.

A backup missing a file is refused before anything is touched; the backup is
copied into a new folder next to the home and every copy is checked against
its SHA-256 there; only then is the current home renamed aside and the staged
folder renamed into its place. A failure before that swap (a corrupt backup,
a full disk, a read-only file system) removes the staging folder and leaves
the home untouched. What is not the product's data (the Dagster instance, the
clock, artifacts, locks) stays with the home. A restore is how a lost
``catalog.db``, ``ledger.db`` or raw store comes back.

Iceberg metadata holds absolute file paths, so a backup restores as it is
into the home path it was taken from; ``restore(..., relocate=True)``
(``atlasmart restore BACKUP --relocate``) restores it at another path, its
tables' metadata rewritten for that path in the staging folder before the
swap (``relocation.py``).
"""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from ...store.home import AtlasmartHome
from ...store.raw_store import sha256_file
from .backup import (
    DATA_ENTRIES,
    FILE_HOOKS,
    TEAM_BACKUP,
    RecoveryError,
    copy_file,
    expected_hashes,
    load_complete_backup,
    os_reason,
    rename,
)


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
    manifest = load_complete_backup(backup_dir)
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
                                f"{os_reason(exc)}; the home {home.root} is untouched") from exc
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
                rename(entry, home.root / entry.name)
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
    layout = {name: name.removeprefix("files/") for name in expected_hashes(manifest)}
    for name, target in layout.items():
        copy_file(backup_dir / name, staging / target)
    bad = [name for name, sha in expected_hashes(manifest).items() if sha256_file(staging / layout[name]) != sha]
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
            rename(root, aside)
    except OSError as exc:
        shutil.rmtree(staged, ignore_errors=True)
        raise RecoveryError(f"restore of backup {backup_id} could not move the home {root} aside: "
                            f"{os_reason(exc)}; the home is untouched") from exc
    try:
        rename(staged, root)
    except OSError as exc:
        reason = os_reason(exc)
        if aside is not None:
            try:
                rename(aside, root)
            except OSError:
                raise RecoveryError(
                    f"restore of backup {backup_id} could not move the restored home into {root} ({reason}) nor put "
                    f"the previous home back: the previous home is at {aside} and the verified restore at "
                    f"{staged}; rename one of them to {root}") from exc
        shutil.rmtree(staged, ignore_errors=True)
        raise RecoveryError(f"restore of backup {backup_id} could not move the restored home into {root}: "
                            f"{reason}; the home is untouched") from exc
    return aside


