"""Semantic layer: the governed gross revenue metric, compiled from its contract."""


import dagster as dg

from ...domain.governed_metrics import GROSS_REVENUE
from ...store.tables import AGG_DAILY_SALES, FACT_SALES, METRIC_GROSS_REVENUE
from ...store.warehouse import duckdb_connection, plan_chunks
from ...transforms.semantic import metric_sql
from ..resources import AtlasmartResource
from ..retries import classified
from .asset_args import DAILY_ASSET_ARGS, table_asset_args
from .certification_candidates import record_certification_candidates
from .reconciliation import METRIC_MATCHES_AGG_SPEC, metric_matches_agg
from .step import Step


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            METRIC_GROSS_REVENUE.name,
            **table_asset_args(
                METRIC_GROSS_REVENUE,
                deps=[FACT_SALES.name, AGG_DAILY_SALES.name],
                owners=["team:analytics-governance"],
                metadata={
                    "metric_definition": dg.MetadataValue.json(GROSS_REVENUE.to_metadata()),
                    "metric_version": GROSS_REVENUE.version,
                    "compiled_sql": dg.MetadataValue.md(f"```sql\n{GROSS_REVENUE.compile_sql()}\n```"),
                },
            ),
            description=(
                "The governed metric gross_revenue_usd per sales_date and channel (a certified product). "
                "Grain: (sales_date, channel), every contract channel present (zero when it sold nothing). The "
                "definition (measure, filters, grain, dimensions, version) is a contract in code, shown in this "
                "asset's metadata; marts and dashboards read this metric instead of restating it. Reconciled "
                "against agg_daily_sales (revenue) by the blocking check metric_matches_agg, in the same step."
            ),
        )
    ],
    check_specs=[METRIC_MATCHES_AGG_SPEC],
    can_subset=True,  # the check alone re-reads what is published
    **DAILY_ASSET_ARGS,
)
@classified
def metric_gross_revenue(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource):
    """Compile the governed metric from fact_sales, then reconcile it with agg_daily_sales."""
    step = Step(context, atlasmart, METRIC_GROSS_REVENUE.name)
    if step.builds:
        counts = step.warehouse.partition_row_counts(FACT_SALES, step.partitions)
        con = duckdb_connection()
        for chunk in plan_chunks(counts, step.platform.chunk_rows):
            step.warehouse.register(con, FACT_SALES, chunk)
            snapshot_id = step.warehouse.overwrite_sql(
                METRIC_GROSS_REVENUE, con, metric_sql(chunk), chunk, step.snapshot_properties()
            )
            record_certification_candidates(step, con, METRIC_GROSS_REVENUE, chunk, snapshot_id)
        con.close()
        yield dg.MaterializeResult(metadata={"metric_version": GROSS_REVENUE.version})
    if step.runs_check(METRIC_MATCHES_AGG_SPEC.name):
        yield from step.report_checks([metric_matches_agg(step)])
