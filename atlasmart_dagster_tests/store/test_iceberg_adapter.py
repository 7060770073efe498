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
