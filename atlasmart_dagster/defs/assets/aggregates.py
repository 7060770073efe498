"""Aggregate layer: agg_daily_sales, the control tuple per business day."""


import dagster as dg

from ...domain.controls import AGG_CONTROLS_SQL, ControlTuple, controls_by_date
from ...store.tables import AGG_DAILY_SALES, FACT_SALES
from ...store.warehouse import duckdb_connection, plan_chunks
from ...transforms.aggregates import agg_daily_sales_sql
from ..resources import AtlasmartResource
from ..retries import classified
from .asset_args import DAILY_ASSET_ARGS, table_asset_args
from .reconciliation import AGG_MATCHES_FACT_SPEC, agg_matches_fact
from .step import Step


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            AGG_DAILY_SALES.name,
            **table_asset_args(AGG_DAILY_SALES, deps=[FACT_SALES.name], owners=["team:data-platform"]),
            description=(
                "Daily sales totals: one row per sales_date with paid lines, orders, units, revenue, cost, profit. "
                "Grain: sales_date. Every loaded day has a row (zeros when nothing was sold). Reconciled against "
                "fact_sales by the blocking check agg_matches_fact, in the same step, before anything downstream "
                "may build."
            ),
        )
    ],
    check_specs=[AGG_MATCHES_FACT_SPEC],
    can_subset=True,  # the check alone re-reads what is published (reconciliation after a suspected fault)
    **DAILY_ASSET_ARGS,
)
@classified
def agg_daily_sales(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource):
    """Build the day totals from fact_sales, then reconcile what was published with fact_sales."""
    step = Step(context, atlasmart, AGG_DAILY_SALES.name)
    if step.builds:
        yield _build(step)
    if step.runs_check(AGG_MATCHES_FACT_SPEC.name):
        yield from step.report_checks([agg_matches_fact(step)])


def _build(step: Step) -> dg.MaterializeResult:
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
