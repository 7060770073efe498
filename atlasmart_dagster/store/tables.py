"""The registry of the warehouse's tables: one place that says what every table is and holds.

Each ``TableSpec`` gives the columns (DuckDB type names, mapped to Iceberg and
Arrow types here), the partition column and the grain (the key that orders
rows canonically for fingerprints), and what the rest of the product needs to
know about it: its layer (also its Dagster group), whether consumers read it
only certified, which checks guard it, whether it carries the control tuple
and whether certification pins it. All columns are optional in Iceberg: the
rules a column must satisfy are enforced by checks that explain themselves,
not by a writer error.

Every list of table names the product uses (the daily chain, the certified
products, the control-carrying layers, the snapshots maintenance protects, the
layers of the access policy) is a view of ``REGISTRY`` declared at the end of
this module. The views are live: a table registered later (a new mart, or a
test's toy mart, ``REGISTRY.registered(spec)``) is in every one of them, and
none is kept by hand. ``docs/adding-a-mart.md`` says what a new mart touches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
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

from ..domain.check_names import (
    GRAIN_UNIQUE,
    MART_MATCHES_AGG_AND_METRIC,
    METRIC_MATCHES_AGG,
    NO_NEGATIVE_MONEY,
    QUALITY_WITHIN_THRESHOLDS,
    STAGED_ROWS_RECONCILE,
)
from ..domain.contracts import CANONICAL_FIELDS, CHANNELS

NAMESPACE = "atlasmart"


def embedded_home_of(location: str) -> tuple[str, str] | None:
    """The home path an embedded home's Iceberg location names (``file://HOME/warehouse/atlasmart/REST``) and
    REST, the file's path under the namespace; None for a location of another form (a bucket, a shared folder)."""
    head, sep, rest = location.partition(f"/warehouse/{NAMESPACE}/")
    if not sep or not head.startswith("file://"):
        return None
    return head.removeprefix("file://"), rest

# Layers, in data-flow order. Each is also the Dagster group of its assets.
INGEST = "ingest"
STAGING = "staging"
FACTS = "facts"
AGGREGATES = "aggregates"
SEMANTIC = "semantic"
MARTS = "marts"
DIMENSIONS = "dimensions"

# What a table's partitions carry that reconciles hop to hop (``atlasmart controls``, ``verify``).
CONTROL_TUPLE = "control_tuple"  # paid lines, orders, units, revenue, cost, profit
REVENUE_ONLY = "revenue_only"  # the governed metric: revenue per channel

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
    layer: str = ""
    # A certified product: consumers read each day only at its served certification.
    certified: bool = False
    # A certified product's own reconciliation check, which the building run must pass.
    reconciled_by: str | None = None
    # Checks of this table whose latest result for a day must be a pass before any product of the day certifies.
    gate_checks: tuple[str, ...] = ()
    # CONTROL_TUPLE, REVENUE_ONLY, or None: what ``atlasmart controls`` and ``verify`` read of it.
    controls: str | None = None
    # The governed chain under every product: a certification re-reads it at the snapshot its build was made on.
    pinned: bool = False
    # What consumers call it (incident notices).
    title: str = ""

    @property
    def daily(self) -> bool:
        """Partitioned by business day: part of the daily chain (the dimensions are not)."""
        return self.partition_column is not None

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
    layer=INGEST,
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
    layer=STAGING,
    gate_checks=(STAGED_ROWS_RECONCILE, QUALITY_WITHIN_THRESHOLDS),
    description="Accepted order line versions; is_current marks the newest version of each key.",
    columns=(Column("sales_date", "DATE"),)
    + _STAGED_BUSINESS
    + _cols(("is_current", "BOOLEAN", "newest accepted version of its (order_id, line_no)")),
    grain=("order_id", "line_no", "source_seq", "batch_id", "source_row"),
)

QUARANTINE_ORDER_LINES = TableSpec(
    name="quarantine_order_lines",
    layer=STAGING,
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
    layer=FACTS,
    gate_checks=(GRAIN_UNIQUE, NO_NEGATIVE_MONEY),
    controls=CONTROL_TUPLE,
    pinned=True,
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

# The six control figures as columns: what every CONTROL_TUPLE table carries, one row per day.
CONTROL_COLUMNS = _cols(
    ("paid_lines", "BIGINT"),
    ("orders", "BIGINT"),
    ("units", "BIGINT"),
    ("revenue_usd", "DECIMAL(18,2)"),
    ("cost_usd", "DECIMAL(18,2)"),
    ("gross_profit_usd", "DECIMAL(18,2)"),
)

AGG_DAILY_SALES = TableSpec(
    name="agg_daily_sales",
    layer=AGGREGATES,
    controls=CONTROL_TUPLE,
    pinned=True,
    description="One row per sales_date with the control tuple.",
    columns=(Column("sales_date", "DATE"),) + CONTROL_COLUMNS,
    grain=("sales_date",),
)

METRIC_GROSS_REVENUE = TableSpec(
    name="metric_gross_revenue",
    layer=SEMANTIC,
    certified=True,
    reconciled_by=METRIC_MATCHES_AGG,
    controls=REVENUE_ONLY,
    pinned=True,
    title="Gross revenue (governed metric)",
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
    layer=MARTS,
    certified=True,
    reconciled_by=MART_MATCHES_AGG_AND_METRIC,
    controls=CONTROL_TUPLE,
    title="Finance daily sales",
    description="Certified daily sales for finance: the full control tuple and margin.",
    columns=(Column("sales_date", "DATE"),)
    + CONTROL_COLUMNS
    + _cols(("gross_margin_pct", "DECIMAL(9,2)"), ("metric_version", "VARCHAR")),
    grain=("sales_date",),
)

MART_EXECUTIVE_REVENUE = TableSpec(
    name="mart_executive_revenue",
    layer=MARTS,
    certified=True,
    reconciled_by=MART_MATCHES_AGG_AND_METRIC,
    controls=CONTROL_TUPLE,
    title="Executive revenue",
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
    layer=DIMENSIONS,
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
    layer=DIMENSIONS,
    description="Products.",
    columns=_cols(("product_id", "VARCHAR"), ("product_name", "VARCHAR"), ("category", "VARCHAR")),
    grain=("product_id",),
    partition_column=None,
)

class TableNames(Sequence[str]):
    """A live, ordered view of the registry: the names of the tables that satisfy ``where``, read at each use."""

    def __init__(self, registry: "TableRegistry", where: Callable[[TableSpec], bool]):
        self._registry = registry
        self._where = where

    def _names(self) -> tuple[str, ...]:
        return tuple(spec.name for spec in self._registry if self._where(spec))

    def __getitem__(self, index):  # type: ignore[override]
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and self._names() == tuple(other)

    __hash__ = None  # type: ignore[assignment]  # it changes with the registry

    def __repr__(self) -> str:
        return repr(self._names())


class _SpecsByName(Mapping[str, TableSpec]):
    """The registry as a mapping from table name to spec (live, like every view)."""

    def __init__(self, registry: "TableRegistry"):
        self._registry = registry

    def __getitem__(self, name: str) -> TableSpec:
        return self._registry.spec(name)

    def __iter__(self) -> Iterator[str]:
        return iter([spec.name for spec in self._registry])

    def __len__(self) -> int:
        return len(self._registry)


class TableRegistry:
    """Every table of the warehouse, in data-flow order; iterating gives the specs."""

    def __init__(self, specs: Sequence[TableSpec]):
        self._specs: dict[str, TableSpec] = {}
        for spec in specs:
            self.register(spec)

    def __iter__(self) -> Iterator[TableSpec]:
        return iter(tuple(self._specs.values()))

    def __len__(self) -> int:
        return len(self._specs)

    def spec(self, name: str) -> TableSpec:
        return self._specs[name]

    def register(self, spec: TableSpec) -> None:
        """Add a table (after every table already known: the data-flow order is the registration order)."""
        if spec.name in self._specs:
            raise ValueError(f"table {spec.name!r} is already registered")
        if spec.certified and spec.reconciled_by is None:
            raise ValueError(f"certified product {spec.name!r} names no reconciliation check (reconciled_by)")
        if spec.certified and not spec.daily:
            raise ValueError(f"certified product {spec.name!r} must be partitioned by day")
        self._specs[spec.name] = spec

    def unregister(self, name: str) -> None:
        del self._specs[name]

    @contextmanager
    def registered(self, *specs: TableSpec) -> Iterator[None]:
        """Tables that exist only within the block (a test's toy mart)."""
        for spec in specs:
            self.register(spec)
        try:
            yield
        finally:
            for spec in specs:
                self.unregister(spec.name)

    def names(self, where: Callable[[TableSpec], bool]) -> TableNames:
        return TableNames(self, where)

    def specs(self, where: Callable[[TableSpec], bool]) -> list[TableSpec]:
        """The specs that satisfy ``where`` now, in data-flow order."""
        return [spec for spec in self if where(spec)]


REGISTRY = TableRegistry((
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
))

# The views. Each is derived from the specs' own attributes; none lists a table.
ALL_TABLES = REGISTRY
TABLES_BY_NAME: Mapping[str, TableSpec] = _SpecsByName(REGISTRY)
# The day-partitioned tables, in data-flow order: what one load of a day builds.
DAILY_CHAIN = REGISTRY.names(lambda s: s.daily)
# The tables consumers read, and only at a certified snapshot of each partition.
CERTIFIED_ASSETS = REGISTRY.names(lambda s: s.certified)
# The certified marts (the products whose delivery has SLOs; the metric is their input).
CERTIFIED_MARTS = REGISTRY.names(lambda s: s.certified and s.layer == MARTS)
# Day-partitioned tables that are not products: what the engineering roles build and read.
ENGINEERING_TABLES = REGISTRY.names(lambda s: s.daily and not s.certified)
DIMENSION_TABLES = REGISTRY.names(lambda s: not s.daily)
# Tables whose partitions carry figures that reconcile hop to hop.
CONTROL_ASSETS = REGISTRY.names(lambda s: s.controls is not None)
# The governed chain a certification pins, by the snapshot under its build.
CHAIN_PINS = REGISTRY.names(lambda s: s.pinned)
