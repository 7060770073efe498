"""The one place AtlasMart relies on pyiceberg internals, each for a measured reason.

pyiceberg's public API covers everything the warehouse does except three
costs that dominated a partition write or a year's certification; each is
narrowed to this module and pinned by
``atlasmart_dagster_tests/store/test_iceberg_adapter.py``, which compares them
with pyiceberg's public behaviour and fails on an upgrade that changes it:

- ``CachedViewTransaction`` overrides ``Transaction.table_metadata`` (a public
  property whose cost, not result, we change);
- ``data_files_for`` builds ``DataFile`` entries as the public
  ``parquet_file_to_data_file`` does, but checks the schema once per write
  through the private ``_check_pyarrow_schema_compatible``;
- ``planned_data_files`` returns the data files ``DataScan.plan_files`` plans,
  from the same partition- and metrics-pruned manifest entries (the private
  ``_plan_manifest_entries``), without the residual expression pyiceberg
  builds for each file: nothing here reads residuals (the warehouse filters
  rows in SQL), and for a year of daily files they were ~0.1 s of every
  planned read (3,285 evaluations when certifying a year).

One behaviour of pyiceberg is classified here too: ``lost_a_commit_race``
recognises a concurrent commit that pyiceberg reports as a ``ValueError``
rather than a ``CommitFailedException``.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import (
    _check_pyarrow_schema_compatible,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import DataScan, Table, Transaction


# pyiceberg's SQL catalog applies a commit's updates to the table's *current* metadata when the
# commit's requirements still hold. A commit on main asserts main's head only; one on a branch,
# that branch's head. So a snapshot committed meanwhile on another ref (the certified branch
# while a run commits main, or main while the certification sensor publishes the branch)
# passes the requirements, and the new snapshot's sequence number, counted from the stale
# metadata, is refused with this ValueError instead of CommitFailedException.
_STALE_SEQUENCE = "Cannot add snapshot with sequence number"


def lost_a_commit_race(exc: BaseException) -> bool:
    """True when ``exc`` is pyiceberg refusing a commit built on metadata another commit has since moved.

    Redoing the commit from the table's new head is the cure, as for
    ``CommitFailedException`` (which pyiceberg raises when the commit's own ref moved).
    """
    return isinstance(exc, ValueError) and str(exc).startswith(_STALE_SEQUENCE)


class DeleteFilesPresent(RuntimeError):
    """A table holds delete files: reading its data files directly would return deleted rows."""


def planned_data_files(scan: DataScan) -> list[DataFile]:
    """The data files ``scan.plan_files()`` plans (same pruning), without per-file residuals.

    Raises ``DeleteFilesPresent`` where pyiceberg would attach delete files:
    the product writes none, and direct Parquet reads would be wrong with them.
    """
    files = []
    for entries in scan._plan_manifest_entries():
        for entry in entries:
            if entry.data_file.content != DataFileContent.DATA:
                raise DeleteFilesPresent(f"{entry.data_file.file_path} is a delete file")
            files.append(entry.data_file)
    return files


class CachedViewTransaction(Transaction):
    """pyiceberg's Transaction, with its view of the metadata computed once per change.

    ``Transaction.table_metadata`` re-applies the pending updates to the base
    metadata and deep-copies the result on every access, and a commit reads
    it ~18 times: ~0.3 s of a 100k-row day's run, growing with the table's
    snapshot history. The metadata models are frozen, so the view can be
    shared until the base (refreshed on a commit retry) or the tuple of
    pending updates (replaced on every change) is a different object.
    """

    _view: tuple | None = None

    @property
    def table_metadata(self):
        base, updates = self._table.metadata, self._updates
        view = self._view
        if view is None or view[0] is not base or view[1] is not updates:
            view = (base, updates, super().table_metadata)
            self._view = view
        return view[2]


def data_files_for(table: Table, metadata, paths: Sequence[str]) -> list[DataFile]:
    """Iceberg DataFile entries (partition, sizes, column statistics) for Parquet files we wrote.

    What pyiceberg's ``parquet_file_to_data_file`` does, with the per-table
    work done once instead of per file: a range write adds one file per day
    and table, all from one COPY with one schema, and re-checking that schema
    for each of 2,920 files of a year cost ~4 ms apiece.
    """
    schema = metadata.schema()
    spec = metadata.spec()
    stats_plan = compute_statistics_plan(schema, metadata.properties)
    id_mapping = parquet_path_to_id_mapping(schema)
    checked: list = []
    out = []
    for path in paths:
        input_file = table.io.new_input(path)
        with input_file.open() as stream:
            parquet_metadata = pq.read_metadata(stream)
        arrow_schema = parquet_metadata.schema.to_arrow_schema()
        if not any(arrow_schema.equals(seen) for seen in checked):
            _check_pyarrow_schema_compatible(schema, arrow_schema, format_version=metadata.format_version)
            checked.append(arrow_schema)
        statistics = data_file_statistics_from_parquet_metadata(
            parquet_metadata=parquet_metadata, stats_columns=stats_plan, parquet_column_mapping=id_mapping
        )
        out.append(
            DataFile.from_args(
                content=DataFileContent.DATA,
                file_path=path,
                file_format=FileFormat.PARQUET,
                partition=statistics.partition(spec, schema),
                file_size_in_bytes=len(input_file),
                sort_order_id=None,
                spec_id=metadata.default_spec_id,
                equality_ids=None,
                key_metadata=None,
                **statistics.to_serialized_dict(),
            )
        )
    return out
