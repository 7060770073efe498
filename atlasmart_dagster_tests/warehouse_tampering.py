"""Helpers that play a fault inside the platform: a wrong partition published, a write damaged, evidence edited.

Each writes wrong data where a real fault would leave it (a table's partition,
a data file about to be committed, the raw store's copy of a manifest) and
never touches a check: the checks must find the fault in the data.
"""

from __future__ import annotations

import json
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from atlasmart_dagster.store import warehouse as warehouse_module
from atlasmart_dagster.store.platform import Platform
from atlasmart_dagster.store.tables import TableSpec

Rows = list[dict]


def publish_changed(
    platform: Platform, spec: TableSpec, partition: str, change: Callable[[Rows], Rows], fault: str
) -> int:
    """Publish a new version of one partition: its current rows passed through ``change``.

    The snapshot is tagged ``run_id=tamper`` and ``fault``, as a drill's bad
    publish is, so a reader of the table's history can tell it apart.
    """
    rows = change(platform.warehouse.read(spec, [partition]).to_pylist())
    table = pa.Table.from_pylist(rows, spec.arrow_schema())
    return platform.warehouse.overwrite(spec, table, [partition], {"run_id": "tamper", "fault": fault})


@contextmanager
def next_commit_loses_a_row(platform: Platform, spec: TableSpec, partition: str) -> Iterator[list[str]]:
    """While open, the next commit of ``spec`` for ``partition`` publishes its data file one row short.

    The damage happens on the warehouse's commit seam, after the step wrote
    the file and before the commit makes it the partition: a torn write on a
    failing disk, or another process rewriting the path, as the step cannot
    see it. Yields the paths it damaged.
    """
    damaged: list[str] = []

    def lose_a_row(home, name: str) -> None:
        if name != spec.name or damaged:
            return
        # The file this commit adds is the one written last (files are named by their bytes: a rebuild of
        # unchanged rows adds the path the day already has, and damaging it damages what is published).
        files = platform.warehouse.data_dir(spec).glob(f"{spec.partition_column}={partition}/*.parquet")
        path = str(max(files, key=lambda p: p.stat().st_mtime_ns))
        table = pq.read_table(path)
        pq.write_table(table.slice(1), path + ".damaged")
        os.replace(path + ".damaged", path)
        damaged.append(path)

    warehouse_module.COMMIT_HOOKS.append(lose_a_row)
    try:
        yield damaged
    finally:
        warehouse_module.COMMIT_HOOKS.remove(lose_a_row)


def edit_stored_manifest(platform: Platform, partition: str, **changes) -> Path:
    """Change fields of the manifest the raw store kept when the day's batch was admitted (the data untouched).

    The raw store keeps its files read-only; an edit by hand (or a restore
    that mixes files) makes them writable first, as this does.
    """
    (stored,) = platform.raw_store.batches(partition)
    path = stored.manifest_path
    manifest = json.loads(path.read_bytes())
    manifest.update(changes)
    mode = path.stat().st_mode
    path.chmod(mode | stat.S_IWUSR)
    path.write_text(json.dumps(manifest, indent=2))
    path.chmod(mode)
    return path
