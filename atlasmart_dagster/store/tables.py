"""Table definitions of the warehouse: one place that says what every table holds.

Each ``TableSpec`` gives the columns (DuckDB type names, mapped to Iceberg and
Arrow types here), the partition column and the grain (the key that orders
rows canonically for fingerprints). All columns are optional in Iceberg: the
rules a column must satisfy are enforced by checks that explain themselves,
not by a writer error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)

from ..domain.contracts import CANONICAL_FIELDS, CHANNELS

NAMESPACE = "atlasmart"

_TYPES: dict[str, tuple[IcebergType, pa.DataType]] = {
    "DATE": (DateType(), pa.date32()),
    "VARCHAR": (StringType(), pa.string()),
    "BIGINT": (LongType(), pa.int64()),
    "INTEGER": (IntegerType(), pa.int32()),
    "BOOLEAN": (BooleanType(), pa.bool_()),
    "TIMESTAMPTZ": (TimestamptzType(), pa.timestamp("us", tz="UTC")),
    "DECIMAL(18,2)": (DecimalType(18, 2), pa.decimal128(18, 2)),
    "DECIMAL(9,2)": (DecimalType(9, 2), pa.decimal128(9, 2)),
}


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str
    description: str = ""


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: tuple[Column, ...]
    grain: tuple[str, ...]
    partition_column: str | None = "sales_date"
    description: str = ""

    @property
    def identifier(self) -> str:
        return f"{NAMESPACE}.{self.name}"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def iceberg_schema(self) -> Schema:
        return Schema(
            *(
                NestedField(i + 1, c.name, _TYPES[c.sql_type][0], required=False, doc=c.description or None)
                for i, c in enumerate(self.columns)
            )
        )

    def partition_spec(self) -> PartitionSpec:
        if self.partition_column is None:
            return PartitionSpec()
        source_id = self.column_names.index(self.partition_column) + 1
        return PartitionSpec(
            PartitionField(
                source_id=source_id, field_id=1000, transform=IdentityTransform(), name=self.partition_column
            )
        )

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, _TYPES[c.sql_type][1]) for c in self.columns])

    def empty_select_sql(self) -> str:
        """A typed, empty DuckDB relation with this table's columns."""
        cols = ", ".join(f"CAST(NULL AS {c.sql_type}) AS {c.name}" for c in self.columns)
        return f"SELECT {cols} WHERE false"

    def conform(self, table: pa.Table) -> pa.Table:
        """Select and cast an Arrow table to exactly this table's schema."""
        return table.select(list(self.column_names)).cast(self.arrow_schema())


def _cols(*pairs: Sequence[str]) -> tuple[Column, ...]:
    return tuple(Column(*p) for p in pairs)


_CANONICAL_TYPED = tuple(
    Column("row_sales_date" if f.name == "sales_date" else f.name, f.sql_type) for f in CANONICAL_FIELDS
)

RAW_ORDER_LINES = TableSpec(
    name="raw_order_lines",
    description="Every landed source row of a day, typed where possible, with its batch lineage.",
    columns=(
        Column("partition_date", "DATE", "sales_date of the batch manifest"),
        Column("batch_id", "VARCHAR", "delivery the row came in"),
        Column("source_row", "INTEGER", "1-based row position in the batch file"),
    )
    + _CANONICAL_TYPED
    + _cols(
        ("type_error_fields", "VARCHAR", "fields whose value failed to cast, comma-separated"),
        ("invalid_values_json", "VARCHAR", "raw text of the values that failed to cast"),
    ),
    grain=("batch_id", "source_row"),
    partition_column="partition_date",
)

_STAGED_BUSINESS = _cols(
    ("order_id", "VARCHAR"),
    ("line_no", "INTEGER"),
    ("source_seq", "BIGINT"),
    ("batch_id", "VARCHAR"),
    ("source_row", "INTEGER"),
    ("event_ts", "TIMESTAMPTZ"),
    ("customer_id", "VARCHAR"),
    ("product_id", "VARCHAR"),
    ("channel", "VARCHAR"),
    ("quantity", "INTEGER"),
    ("line_amount_usd", "DECIMAL(18,2)"),
    ("line_cost_usd", "DECIMAL(18,2)"),
    ("status", "VARCHAR"),
)

STG_ORDER_LINES = TableSpec(
    name="stg_order_lines",
    description="Accepted order line versions; is_current marks the newest version of each key.",
    columns=(Column("sales_date", "DATE"),)
    + _STAGED_BUSINESS
    + _cols(("is_current", "BOOLEAN", "newest accepted version of its (order_id, line_no)")),
    grain=("order_id", "line_no", "source_seq", "batch_id", "source_row"),
)

QUARANTINE_ORDER_LINES = TableSpec(
    name="quarantine_order_lines",
    description="Rows the quality gate refused, one reason per row.",
    columns=_cols(
        ("sales_date", "DATE"),
        ("batch_id", "VARCHAR"),
        ("source_row", "INTEGER"),
        ("source_seq", "BIGINT"),
        ("order_id", "VARCHAR"),
        ("line_no", "INTEGER"),
        ("reason", "VARCHAR", "duplicate_key | null_required_field | non_positive_quantity | negative_amount | unknown_channel | type_error | wrong_partition"),
        ("reason_detail", "VARCHAR", "the field(s) or the earlier row the reason refers to"),
        ("row_sales_date", "DATE"),
        ("event_ts", "TIMESTAMPTZ"),
        ("customer_id", "VARCHAR"),
        ("product_id", "VARCHAR"),
        ("channel", "VARCHAR"),
        ("quantity", "INTEGER"),
        ("line_amount_usd", "DECIMAL(18,2)"),
        ("line_cost_usd", "DECIMAL(18,2)"),
        ("status", "VARCHAR"),
        ("invalid_values_json", "VARCHAR"),
    ),
    grain=("batch_id", "source_row"),
)

FACT_SALES = TableSpec(
    name="fact_sales",
    description="One current accepted paid order line per (order_id, line_no).",
    columns=_cols(
        ("sales_date", "DATE"),
        ("order_id", "VARCHAR"),
        ("line_no", "INTEGER"),
        ("event_ts", "TIMESTAMPTZ"),
        ("customer_id", "VARCHAR"),
        ("product_id", "VARCHAR"),
        ("channel", "VARCHAR"),
        ("quantity", "INTEGER"),
        ("revenue_usd", "DECIMAL(18,2)"),
        ("cost_usd", "DECIMAL(18,2)"),
        ("gross_profit_usd", "DECIMAL(18,2)"),
        ("batch_id", "VARCHAR"),
        ("source_seq", "BIGINT"),
    ),
    grain=("order_id", "line_no"),
)

_CONTROL_COLUMNS = _cols(
    ("paid_lines", "BIGINT"),
    ("orders", "BIGINT"),
    ("units", "BIGINT"),
    ("revenue_usd", "DECIMAL(18,2)"),
    ("cost_usd", "DECIMAL(18,2)"),
    ("gross_profit_usd", "DECIMAL(18,2)"),
)

AGG_DAILY_SALES = TableSpec(
    name="agg_daily_sales",
    description="One row per sales_date with the control tuple.",
    columns=(Column("sales_date", "DATE"),) + _CONTROL_COLUMNS,
    grain=("sales_date",),
)

METRIC_GROSS_REVENUE = TableSpec(
    name="metric_gross_revenue",
    description="The governed gross revenue metric per sales_date and channel.",
    columns=_cols(
        ("sales_date", "DATE"),
        ("channel", "VARCHAR"),
        ("metric_name", "VARCHAR"),
        ("metric_version", "VARCHAR"),
        ("value_usd", "DECIMAL(18,2)"),
    ),
    grain=("sales_date", "channel"),
)

MART_FINANCE_DAILY_SALES = TableSpec(
    name="mart_finance_daily_sales",
    description="Certified daily sales for finance: the full control tuple and margin.",
    columns=(Column("sales_date", "DATE"),)
    + _CONTROL_COLUMNS
    + _cols(("gross_margin_pct", "DECIMAL(9,2)"), ("metric_version", "VARCHAR")),
    grain=("sales_date",),
)

MART_EXECUTIVE_REVENUE = TableSpec(
    name="mart_executive_revenue",
    description="Certified executive revenue: governed revenue, its channel split, profit and order value.",
    columns=_cols(("sales_date", "DATE"), ("revenue_usd", "DECIMAL(18,2)"))
    + tuple(Column(f"revenue_{c}_usd", "DECIMAL(18,2)", f"governed revenue from channel {c}") for c in CHANNELS)
    + _cols(
        ("gross_profit_usd", "DECIMAL(18,2)"),
        ("gross_margin_pct", "DECIMAL(9,2)"),
        ("orders", "BIGINT"),
        ("avg_order_value_usd", "DECIMAL(18,2)"),
        ("paid_lines", "BIGINT"),
        ("units", "BIGINT"),
        ("cost_usd", "DECIMAL(18,2)"),
        ("metric_version", "VARCHAR"),
    ),
    grain=("sales_date",),
)

DIM_CUSTOMER = TableSpec(
    name="dim_customer",
    description="Customers. full_name and email are PII.",
    columns=_cols(
        ("customer_id", "VARCHAR"),
        ("full_name", "VARCHAR", "PII"),
        ("email", "VARCHAR", "PII"),
        ("region", "VARCHAR"),
    ),
    grain=("customer_id",),
    partition_column=None,
)

DIM_PRODUCT = TableSpec(
    name="dim_product",
    description="Products.",
    columns=_cols(("product_id", "VARCHAR"), ("product_name", "VARCHAR"), ("category", "VARCHAR")),
    grain=("product_id",),
    partition_column=None,
)

ALL_TABLES: tuple[TableSpec, ...] = (
    RAW_ORDER_LINES,
    STG_ORDER_LINES,
    QUARANTINE_ORDER_LINES,
    FACT_SALES,
    AGG_DAILY_SALES,
    METRIC_GROSS_REVENUE,
    MART_FINANCE_DAILY_SALES,
    MART_EXECUTIVE_REVENUE,
    DIM_CUSTOMER,
    DIM_PRODUCT,
)
TABLES_BY_NAME = {t.name: t for t in ALL_TABLES}
# The tables consumers read, and only at a certified snapshot of each partition.
CERTIFIED_ASSETS = (METRIC_GROSS_REVENUE.name, MART_FINANCE_DAILY_SALES.name, MART_EXECUTIVE_REVENUE.name)
