"""Reference dimensions loaded from the ERP's reference extracts."""


from pathlib import Path

import dagster as dg

from ...store.tables import DIM_CUSTOMER, DIM_PRODUCT, TableSpec
from ...store.warehouse import duckdb_connection
from ..resources import AtlasmartResource
from ..retries import STORAGE_RETRY_POLICY, classified


def reference_dir(landing_root: Path) -> Path:
    """Reference extracts sit next to the landing zone (``<landing>/../reference``)."""
    return landing_root.parent / "reference"


def _load(context, atlasmart: AtlasmartResource, spec: TableSpec, file_name: str) -> dg.MaterializeResult:
    platform = atlasmart.platform
    path = reference_dir(platform.landing_root) / file_name
    if not path.is_file():
        raise dg.Failure(description=f"reference file {path} is missing", allow_retries=False)
    con = duckdb_connection()
    columns = ", ".join(f"'{c}': 'VARCHAR'" for c in spec.column_names)
    quoted = str(path).replace("'", "''")
    data = con.sql(
        f"SELECT * FROM read_json('{quoted}', format='newline_delimited', columns={{{columns}}}) "
        f"ORDER BY {', '.join(spec.grain)}"
    ).to_arrow_table()
    con.close()
    snapshot_id = platform.warehouse.overwrite(spec, data, None, {"run_id": context.run.run_id, "asset": spec.name})
    return dg.MaterializeResult(metadata={"rows": data.num_rows, "snapshot_id": str(snapshot_id)})


@dg.asset(
    group_name="dimensions",
    kinds={"iceberg", "duckdb"},
    owners=["team:data-platform"],
    retry_policy=STORAGE_RETRY_POLICY,
    metadata={"pii_columns": "full_name, email"},
)
@classified
def dim_customer(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource) -> dg.MaterializeResult:
    """Customer dimension (one row per customer_id). Holds PII: full_name and email.

    Only roles cleared for PII may read those columns (see the access policy);
    PII never appears in logs, check metadata or notices.
    """
    return _load(context, atlasmart, DIM_CUSTOMER, "customers.jsonl")


@dg.asset(
    group_name="dimensions",
    kinds={"iceberg", "duckdb"},
    owners=["team:data-platform"],
    retry_policy=STORAGE_RETRY_POLICY,
)
@classified
def dim_product(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource) -> dg.MaterializeResult:
    """Product dimension (one row per product_id): name and category."""
    return _load(context, atlasmart, DIM_PRODUCT, "products.jsonl")
