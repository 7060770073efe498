"""The pyiceberg adapter still behaves like pyiceberg's public API (this fails first on an upgrade that changes it)."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import parquet_file_to_data_file
from pyiceberg.table import Transaction

from atlasmart_dagster.store.home import AtlasmartHome
from atlasmart_dagster.store.iceberg_adapter import CachedViewTransaction, data_files_for
from atlasmart_dagster.store.tables import AGG_DAILY_SALES
from atlasmart_dagster.store.warehouse import Warehouse

from .test_warehouse import _agg


@pytest.fixture
def table(tmp_path):
    warehouse = Warehouse(AtlasmartHome(tmp_path))
    warehouse.overwrite(AGG_DAILY_SALES, _agg("2026-09-20", "185.00"), ["2026-09-20"])
    return warehouse.table(AGG_DAILY_SALES)


def _parquet(table, tmp_path, rows: pa.Table) -> str:
    path = tmp_path / "file.parquet"
    pq.write_table(rows, path)
    return f"file://{path}"


def test_data_files_equal_the_public_conversion(table, tmp_path):
    path = _parquet(table, tmp_path, _agg("2026-09-21", "60.00"))
    (ours,) = data_files_for(table, table.metadata, [path])
    public = parquet_file_to_data_file(table.io, table.metadata, path)
    for field in ("file_path", "file_format", "partition", "record_count", "file_size_in_bytes", "column_sizes",
                  "value_counts", "null_value_counts", "lower_bounds", "upper_bounds"):
        assert getattr(ours, field) == getattr(public, field), field


def test_data_files_refuse_a_schema_the_table_cannot_hold(table, tmp_path):
    path = _parquet(table, tmp_path, pa.table({"sales_date": ["not a date"], "surprise": [1]}))
    with pytest.raises(Exception) as ours:
        data_files_for(table, table.metadata, [path])
    with pytest.raises(Exception) as public:
        parquet_file_to_data_file(table.io, table.metadata, path)
    assert type(ours.value) is type(public.value)


def _content(metadata) -> dict:
    return metadata.model_dump(exclude={"last_updated_ms"})


def test_cached_view_sees_every_pending_change_as_the_public_property_does(table):
    plain, cached = Transaction(table), CachedViewTransaction(table)
    assert cached.table_metadata == plain.table_metadata
    first = cached.table_metadata
    assert cached.table_metadata is first  # cached while nothing changed
    for transaction in (plain, cached):
        transaction.set_properties(**{"atlasmart.test": "1"})
    assert cached.table_metadata is not first
    # equal but for the clock: each view stamps last_updated_ms when it applies the updates
    assert _content(cached.table_metadata) == _content(plain.table_metadata)
    assert cached.table_metadata.properties["atlasmart.test"] == "1"


@pytest.mark.parametrize("days", [None, ["2026-09-20"], ["2026-09-18", "2026-09-20"], ["2026-09-19", "2026-09-21"],
                                  ["2026-09-17"]])
def test_planned_data_files_are_the_files_the_public_plan_returns(tmp_path, days):
    """The same files for every filter shape the warehouse builds (one day, a range, a set, a day not there)."""
    from atlasmart_dagster.store.iceberg_adapter import planned_data_files
    from atlasmart_dagster.store.warehouse import _partition_filter

    warehouse = Warehouse(AtlasmartHome(tmp_path))
    for day in ("2026-09-18", "2026-09-19", "2026-09-20", "2026-09-21"):
        warehouse.overwrite(AGG_DAILY_SALES, _agg(day, "185.00"), [day])
    warehouse.overwrite(AGG_DAILY_SALES, _agg("2026-09-20", "190.00"), ["2026-09-20"])  # a replaced file
    table = warehouse.table(AGG_DAILY_SALES)
    scan = table.scan(row_filter=_partition_filter(AGG_DAILY_SALES, days))
    public = sorted(task.file.file_path for task in scan.plan_files())
    # a day never written plans nothing; every other filter must plan something, or the comparison is empty
    assert bool(public) == (days != ["2026-09-17"])
    assert sorted(f.file_path for f in planned_data_files(scan)) == public
    old = table.snapshots()[1].snapshot_id  # before the replacement: its own files
    scan = table.scan(row_filter=_partition_filter(AGG_DAILY_SALES, days), snapshot_id=old)
    assert sorted(f.file_path for f in planned_data_files(scan)) == sorted(t.file.file_path for t in scan.plan_files())
