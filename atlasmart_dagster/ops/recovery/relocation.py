"""Relocating a home: a home copied or moved to another path, or a backup restored at another path.

Iceberg metadata holds absolute paths: each table's metadata file, the
manifest lists of its snapshots and their manifests name the files under the
warehouse where the home was created. A home copied with ``cp -a`` (or moved,
or restored from a backup taken at another path) still names the old path,
and every command refuses it (``store/platform.py``): reading it would read
the old home's files, or none.

``atlasmart relocate`` (``relocate_home``) and ``atlasmart restore BACKUP
--relocate`` rewrite, for every table in the catalog, its current metadata,
its manifest lists and its manifests so that they name the same files under
the home's own warehouse, with the rewriting migrate uses (``ops/recovery/iceberg_paths.py``).
The files read are always the copy's own, never the old path's (which may
still hold the original home). Iceberg files are immutable, so the rewritten
ones are written beside the old ones under new names; the catalog is then
pointed at the new metadata in one transaction, which is the commit. A
relocation stopped before it leaves the home as it was (still refused, and
``relocate`` runs again) and removes what it wrote; after it, the copy's
former metadata files, which name the old path, are deleted. Previous
metadata files are not carried into the rewritten metadata log (as in
migrate). Data files, the ledger and the raw store hold no paths and are not
touched, so every certified fingerprint stays what it was; ``relocate`` runs
``verify`` afterwards to prove it. In place, the Dagster folder's
``dagster.yaml`` (which pins the log file and the storage to the home's path)
is rewritten too.

The embedded home only: the team deployment's tables live in a shared folder
or a bucket whose path does not move with a home.
"""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyiceberg.io import load_file_io
from pyiceberg.manifest import read_manifest_list
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record

from ...errors import AtlasmartError
from ...store.home import AtlasmartHome
from ...store.locks import home_lock
from ...store.tables import NAMESPACE, embedded_home_of
from .iceberg_paths import FILE, PathMap, position, relocate_data_files, relocate_manifests, rewrite_avro

WAREHOUSE = "warehouse"  # the table files' folder in a home (AtlasmartHome.warehouse_dir)
_DELETED = 2  # a manifest entry's status for a file a later snapshot removed (a backup does not hold it)
_METADATA_NAME = re.compile(r"^(\d+)-.*\.metadata\.json$")


class RelocationError(AtlasmartError):
    """A home or a backup cannot be relocated (nothing was changed)."""


class _Relocation(PathMap):
    """Maps the old warehouse's file URIs to the new one; reads and writes the copy's files in ``folder``.

    A rewritten manifest or manifest list gets a new name (``renamed``, by
    its path under the warehouse); data files keep theirs.
    """

    error = RelocationError

    def __init__(self, old_root: Path, new_root: Path, folder: Path):
        self.old = str(old_root / WAREHOUSE)
        self.new = f"{FILE}{new_root / WAREHOUSE}"
        self.staging = folder / WAREHOUSE  # rewritten files go into the copy itself
        self.bases = (f"{FILE}{self.old}", f"{FILE}{self.staging}", self.new)
        self.renamed: dict[str, str] = {}

    def original(self, uri: str) -> str:
        """``uri``'s path under its warehouse (the old one, the copy's or the new one), as the copy names it."""
        for base in self.bases:
            if uri.startswith(base + "/"):
                return uri[len(base) + 1:]
        raise RelocationError(f"{uri} is not a file of the warehouse {self.old}: it cannot be relocated; "
                              f"nothing was changed")

    def relative(self, uri: str, root: str | None = None) -> str:
        path = self.original(uri)
        return self.renamed.get(path, path)

    def local(self, uri: str) -> Path:
        """The copy's file for ``uri`` (as it is named now, before any rewrite)."""
        return self.staging / self.original(uri)

    def rename(self, uri: str, name: str) -> None:
        path = self.original(uri)
        self.renamed[path] = f"{path.rsplit('/', 1)[0]}/{name}"


def recorded_root(catalog_db: Path) -> Path | None:
    """The home path the catalog's metadata names (where the home was created or backed up), or None when empty.

    Refused when the tables name no home's warehouse, or different ones.
    """
    roots = {}
    for (name,), location in _catalog_rows(catalog_db).items():
        named = embedded_home_of(location)
        if named is None:
            raise RelocationError(f"the catalog {catalog_db} names {location} for table {name}, which is not in a "
                                  f"home's {WAREHOUSE}/ folder: it cannot be relocated; nothing was changed")
        roots[Path(named[0])] = name
    if len(roots) > 1:
        raise RelocationError(f"the catalog {catalog_db} names the files of several homes "
                              f"({', '.join(sorted(map(str, roots)))}): it cannot be relocated; nothing was changed")
    return next(iter(roots), None)


def _catalog_rows(catalog_db: Path) -> dict[tuple[str], str]:
    con = sqlite3.connect(f"file:{catalog_db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT table_name, metadata_location FROM iceberg_tables "
                           "WHERE table_namespace = ? AND metadata_location IS NOT NULL", (NAMESPACE,)).fetchall()
    finally:
        con.close()
    return {(name,): location for name, location in rows}


def _present(places: _Relocation) -> Callable[[Schema, list[Record]], None]:
    """Refuse a manifest naming a live data file the copy lacks, then name its files under the new warehouse."""
    relocate = relocate_data_files(places)

    def change(schema: Schema, entries: list[Record]) -> None:
        status, data_file = position(schema.fields, "status"), position(schema.fields, "data_file")
        file_path = position(schema.fields[data_file].field_type.fields, "file_path")
        for entry in entries:
            path = entry[data_file][file_path]
            if entry[status] != _DELETED and not places.local(path).is_file():
                raise RelocationError(f"{places.local(path)} is missing: the copy lacks a data file its metadata "
                                      f"names (an incomplete copy); nothing was changed")
        relocate(schema, entries)
    return change


def _relocate_table(name: str, location: str, places: _Relocation, written: list[Path],
                    replaced: list[Path]) -> str:
    """Write the table's metadata, manifest lists and manifests rewritten for the new path; its new metadata URI."""
    current = places.local(location)
    if not current.is_file():
        raise RelocationError(f"table {name}: its metadata {current} is not in this home (the catalog names "
                              f"{location}): this home is not a copy of that one; nothing was changed")
    number = _METADATA_NAME.match(current.name)
    if number is None:
        raise RelocationError(f"table {name}: {current.name} is not an uncompressed metadata file; nothing was changed")
    metadata = json.loads(current.read_text())
    replaced.append(current)
    replaced += [places.local(entry["metadata-file"]) for entry in metadata.get("metadata-log", [])]
    io = load_file_io({}, f"{FILE}{current}")
    lengths: dict[str, int] = {}
    for snapshot in metadata.get("snapshots", []):
        listed = snapshot.get("manifest-list")
        if not listed:
            raise RelocationError(f"table {name}: snapshot {snapshot['snapshot-id']} has no manifest list (format "
                                  f"v1); nothing was changed")
        for manifest in read_manifest_list(io.new_input(f"{FILE}{places.local(listed)}")):
            path = manifest.manifest_path
            if path in lengths:
                continue  # manifests are shared by many snapshots
            places.rename(path, f"{uuid.uuid4()}-m0.avro")
            lengths[path] = rewrite_avro(io, f"{FILE}{places.local(path)}", places, _present(places))
            written.append(places.staged(path))
            replaced.append(places.local(path))
        places.rename(listed, f"snap-{snapshot['snapshot-id']}-1-{uuid.uuid4()}.avro")
        rewrite_avro(io, f"{FILE}{places.local(listed)}", places, relocate_manifests(places, lengths))
        written.append(places.staged(listed))
        replaced.append(places.local(listed))
        snapshot["manifest-list"] = places.moved(listed)
    metadata["location"] = places.moved(metadata["location"])
    metadata["metadata-log"] = []  # previous metadata files name the old path: they are not carried on
    left = places.left_behind(metadata)
    if left:
        raise RelocationError(f"table {name}: its metadata names the old path where relocation does not rewrite "
                              f"it ({left[0]}); nothing was changed")
    target = current.with_name(f"{int(number.group(1)) + 1:05d}-{uuid.uuid4()}.metadata.json")
    target.write_text(json.dumps(metadata))
    written.append(target)
    return places.moved(f"{FILE}{target}")


def relocate_files(folder: Path, old_root: Path, new_root: Path) -> dict[str, Any]:
    """Rewrite the catalog and table metadata of the home laid out in ``folder`` from ``old_root`` to ``new_root``.

    ``folder`` is the home itself (relocated in place) or a restore's staging
    folder (which becomes the home at ``new_root``). All or nothing: the
    catalog's one transaction is the commit.
    """
    places = _Relocation(old_root, new_root, folder)
    catalog_db = folder / "catalog.db"
    written: list[Path] = []
    replaced: list[Path] = []
    try:
        moved = {name: _relocate_table(name, location, places, written, replaced)
                 for (name,), location in sorted(_catalog_rows(catalog_db).items())}
        con = sqlite3.connect(catalog_db, timeout=60)
        try:
            with con:  # the commit: every table at once
                for name, location in moved.items():
                    con.execute("UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = NULL "
                                "WHERE table_namespace = ? AND table_name = ?", (location, NAMESPACE, name))
        finally:
            con.close()
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    for path in set(replaced) - set(written):
        try:
            path.unlink(missing_ok=True)  # the copy's former metadata: unreferenced now, and naming the old path
        except OSError:
            pass  # left as an orphan file; `atlasmart maintain --remove-orphans` can remove it
    return {"from": str(old_root), "to": str(new_root), "tables": len(moved), "files_rewritten": len(written)}


def _rewrite_dagster_config(home: AtlasmartHome, old_root: Path) -> bool:
    """Point the home's ``dagster.yaml`` (its log file and storage folder) at the new path; whether it changed."""
    config = home.dagster_home / "dagster.yaml"
    if not config.is_file():
        return False
    text = config.read_text()
    # Written as JSON strings by store/instance/dagster_instance.py; the closing quote keeps "/a" from matching "/a/dagster".
    changed = text.replace(json.dumps(str(old_root / "dagster")), json.dumps(str(home.dagster_home))).replace(
        json.dumps(str(old_root)), json.dumps(str(home.root)))
    if changed == text:
        return False
    config.write_text(changed)
    return True


def relocate_home(home: AtlasmartHome) -> dict[str, Any]:
    """Relocate a home copied or moved to its path: its tables' metadata and its Dagster config name this path.

    Under the catalog's lock (no commit interleaves). A home whose catalog
    names its own path already is left as it is (``relocated`` false).
    """
    if home.team or home.objects is not None:
        raise RelocationError("atlasmart relocate covers the embedded home only: the team deployment's tables live "
                              "in its shared folder or bucket, which does not move with a home")
    if not home.catalog_db.is_file():
        raise RelocationError(f"{home.root} holds no catalog ({home.catalog_db}): there is nothing to relocate")
    with home_lock(home, "catalog"):
        old_root = recorded_root(home.catalog_db)
        if old_root is None or old_root == home.root:
            return {"relocated": False, "from": str(old_root or home.root), "to": str(home.root), "tables": 0,
                    "files_rewritten": 0, "dagster_config": False}
        report = relocate_files(home.root, old_root, home.root)
        return {"relocated": True, **report, "dagster_config": _rewrite_dagster_config(home, old_root)}
