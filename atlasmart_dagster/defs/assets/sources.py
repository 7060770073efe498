"""The ERP source, declared so lineage (and a blast radius) starts where the data does."""

import dagster as dg

from ...domain.contracts import CANONICAL_FIELDS, CONTRACT_V1

ERP_ORDER_LINES = dg.AssetSpec(
    "erp_order_lines",
    description=(
        "ERP order lines as delivered to the landing zone (one folder per sales_date with a data file and "
        "_manifest.json). Not materialized by Dagster: the raw layer reads it when a manifest says it is ready."
    ),
    group_name="source",
    owners=["team:erp-operations"],
    kinds={"erp"},
    metadata={
        "source_contract": CONTRACT_V1.version,
        "dagster/column_schema": dg.TableSchema(
            columns=[dg.TableColumn(f.name, f.sql_type.lower()) for f in CANONICAL_FIELDS]
        ),
    },
)
