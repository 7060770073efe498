"""Semantic layer: the governed gross revenue metric, compiled from its contract."""


import dagster as dg

from ...domain.governed_metrics import GROSS_REVENUE
from ...store.tables import FACT_SALES, METRIC_GROSS_REVENUE
from ...store.warehouse import duckdb_connection, plan_chunks
from ...transforms.semantic import metric_sql
from ..checks.reconciliation_checks import METRIC_MATCHES_AGG_SPEC, metric_matches_agg
from ..lineage import lineage_metadata
from ..partitions import BACKFILL_POLICY, daily_partitions
from ..resources import AtlasmartResource
from ..retries import STORAGE_RETRY_POLICY, classified
from .certification_candidates import record_certification_candidates
from .step import Step


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            "metric_gross_revenue",
            deps=["fact_sales", "agg_daily_sales"],
            description=(
                "The governed metric gross_revenue_usd per sales_date and channel (a certified product). "
                "Grain: (sales_date, channel), every contract channel present (zero when it sold nothing). The "
                "definition (measure, filters, grain, dimensions, version) is a contract in code, shown in this "
                "asset's metadata; marts and dashboards read this metric instead of restating it. Reconciled "
                "against agg_daily_sales (revenue) by the blocking check metric_matches_agg, in the same step."
            ),
            group_name="semantic",
            kinds={"iceberg", "duckdb"},
            owners=["team:analytics-governance"],
            metadata={
                **lineage_metadata("metric_gross_revenue"),
                "metric_definition": dg.MetadataValue.json(GROSS_REVENUE.to_metadata()),
                "metric_version": GROSS_REVENUE.version,
                "compiled_sql": dg.MetadataValue.md(f"```sql\n{GROSS_REVENUE.compile_sql()}\n```"),
            },
        )
    ],
    check_specs=[METRIC_MATCHES_AGG_SPEC],
    can_subset=True,  # the check alone re-reads what is published
    partitions_def=daily_partitions,
    backfill_policy=BACKFILL_POLICY,
    retry_policy=STORAGE_RETRY_POLICY,
)
@classified
def metric_gross_revenue(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource):
    """Compile the governed metric from fact_sales, then reconcile it with agg_daily_sales."""
    step = Step(context, atlasmart, "metric_gross_revenue")
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
