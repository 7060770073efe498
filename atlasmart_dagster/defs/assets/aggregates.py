"""Aggregate layer: agg_daily_sales, the control tuple per business day."""


import dagster as dg

from ...domain.controls import AGG_CONTROLS_SQL, ControlTuple, controls_by_date
from ...store.tables import AGG_DAILY_SALES, FACT_SALES
from ...store.warehouse import duckdb_connection, plan_chunks
from ...transforms.aggregates import agg_daily_sales_sql
from ..lineage import lineage_metadata
from ..partitions import daily_partitions
from ..resources import AtlasmartResource
from ..retries import STORAGE_RETRY_POLICY, classified
from .step import Step


@dg.asset(
    deps=["fact_sales"],
    partitions_def=daily_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    retry_policy=STORAGE_RETRY_POLICY,
    group_name="aggregates",
    kinds={"iceberg", "duckdb"},
    owners=["team:data-platform"],
    metadata=lineage_metadata("agg_daily_sales"),
)
@classified
def agg_daily_sales(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource) -> dg.MaterializeResult:
    """Daily sales totals: one row per sales_date with paid lines, orders, units, revenue, cost, profit.

    Grain: sales_date. Every loaded day has a row (zeros when nothing was
    sold). Reconciled against fact_sales by the blocking check
    agg_matches_fact before anything downstream may build.
    """
    step = Step(context, atlasmart, "agg_daily_sales")
    counts = step.warehouse.partition_row_counts(FACT_SALES, step.partitions)
    per_partition = {}
    con = duckdb_connection()
    for chunk in plan_chunks(counts, step.platform.chunk_rows):
        step.warehouse.register(con, FACT_SALES, chunk)
        snapshot_id = step.warehouse.overwrite_sql(
            AGG_DAILY_SALES, con, agg_daily_sales_sql(chunk), chunk, step.snapshot_properties()
        )
        published = step.warehouse.register(con, AGG_DAILY_SALES, chunk, snapshot_id, name="published_agg")
        observed = controls_by_date(con, AGG_CONTROLS_SQL, published)
        with step.ledger.transaction():
            for partition in chunk:
                got = observed.get(partition, ControlTuple())
                step.record_built(partition, snapshot_id, controls=got)
                per_partition[partition] = {"controls": str(got), "snapshot_id": str(snapshot_id)}
                step.log_partition(partition, "ok", controls=got.to_json())
    con.close()
    step.add_partition_metadata(per_partition)
    return dg.MaterializeResult()
