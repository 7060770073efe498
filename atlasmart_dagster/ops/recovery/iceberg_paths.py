"""Rewriting the paths an Iceberg table's metadata holds: the one mechanism ``migrate`` and ``relocate`` share.

Iceberg metadata names files by absolute URI: the metadata JSON its
manifest lists, each manifest list its manifests (with their lengths), each
manifest its data files. Moving a table's files to another warehouse (migrate)
or a home to another path (relocate) rewrites those URIs in copies of the Avro
files, decoded and re-encoded with their own schema and header by pyiceberg's
Avro reader and writer, manifests first so each manifest list carries their
new lengths. A ``PathMap`` says how a URI of the old warehouse maps to the new
one and where its rewritten copy is staged; a rewritten file that still names
the old warehouse stops the caller with its own error, before anything is
committed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pyiceberg.avro.file import AvroFile, AvroOutputFile
from pyiceberg.io import FileIO
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record

from ...errors import AtlasmartError

FILE = "file://"


class PathMap:
    """Maps file URIs of the old warehouse (``old``, a folder) to the new one (``new``, a location URI), and to
    where their rewritten copy is staged (``staging``). ``error`` is what a caller's refusal raises."""

    error: type[AtlasmartError] = AtlasmartError
    old: str
    new: str
    staging: Path

    def relative(self, uri: str, root: str | None = None) -> str:
        """``uri``'s path under the old warehouse (or under ``root``, a location URI)."""
        raise NotImplementedError

    def moved(self, uri: str) -> str:
        return f"{self.new}/{self.relative(uri)}"

    def staged(self, uri: str) -> Path:
        return self.staging / self.relative(uri)

    def left_behind(self, value: Any) -> list[str]:
        """Strings in ``value`` (JSON, Avro records) that still name the old warehouse."""
        return [s for s in _strings(value) if self.old + "/" in s or s.endswith(self.old)]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, Record | list | tuple):
        for index in range(len(value)):
            yield from _strings(value[index])


def position(fields, name: str) -> int:
    """The index of the field ``name`` in an Avro record's fields."""
    return next(i for i, f in enumerate(fields) if f.name == name)


def rewrite_avro(io: FileIO, uri: str, places: PathMap, change: Callable[[Schema, list[Record]], None]) -> int:
    """Copy one Avro file of the table to its staged place with ``change`` applied; returns its new length."""
    with AvroFile(io.new_input(uri)) as avro:
        schema, meta, records = avro.schema, dict(avro.header.meta), list(avro)
    change(schema, records)
    left = places.left_behind(records)
    if left:
        raise places.error(f"{uri} still names the old warehouse after rewriting ({left[0]}); nothing was changed")
    schema_name = json.loads(meta.pop("avro.schema"))["name"]
    target = places.staged(uri)
    target.parent.mkdir(parents=True, exist_ok=True)
    with AvroOutputFile(io.new_output(str(target)), schema, schema_name, metadata=meta) as out:
        if records:
            out.write_block(records)
    return target.stat().st_size


def relocate_data_files(places: PathMap) -> Callable[[Schema, list[Record]], None]:
    """A manifest's change: each data file named under the new warehouse."""
    def change(schema: Schema, entries: list[Record]) -> None:
        data_file = position(schema.fields, "data_file")
        file_path = position(schema.fields[data_file].field_type.fields, "file_path")
        for entry in entries:
            entry[data_file][file_path] = places.moved(entry[data_file][file_path])
    return change


def relocate_manifests(places: PathMap, lengths: dict[str, int]) -> Callable[[Schema, list[Record]], None]:
    """A manifest list's change: each manifest named under the new warehouse, with its rewritten length."""
    def change(schema: Schema, manifests: list[Record]) -> None:
        path, length = position(schema.fields, "manifest_path"), position(schema.fields, "manifest_length")
        for manifest in manifests:
            manifest[length] = lengths[manifest[path]]
            manifest[path] = places.moved(manifest[path])
    return change
