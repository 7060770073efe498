"""Mart layer: certified marts for finance and executives, built from the governed metric."""


from datetime import timedelta

import dagster as dg

from ...store.tables import (
    AGG_DAILY_SALES,
    MART_EXECUTIVE_REVENUE,
    MART_FINANCE_DAILY_SALES,
    METRIC_GROSS_REVENUE,
    TableSpec,
)
from ...store.warehouse import duckdb_connection, plan_chunks
from ...transforms.marts import executive_mart_sql, finance_mart_sql
from ..lineage import lineage_metadata
from ..partitions import daily_partitions
from ..resources import AtlasmartResource
from ..retries import STORAGE_RETRY_POLICY, classified
from .certification_candidates import record_certification_candidates
from .step import Step

# For the UI only: Dagster evaluates freshness on the newest materialization of
# any partition. Per-partition SLOs are measured by AtlasMart (see product/slo.py).
MART_FRESHNESS = dg.FreshnessPolicy.cron(
    deadline_cron="30 8 * * *", lower_bound_delta=timedelta(hours=24), timezone="UTC"
)


def _build_mart(context, atlasmart: AtlasmartResource, spec: TableSpec, build) -> dg.MaterializeResult:
    step = Step(context, atlasmart, spec.name)
    counts = step.warehouse.partition_row_counts(AGG_DAILY_SALES, step.partitions)
    con = duckdb_connection()
    for chunk in plan_chunks(counts, step.platform.chunk_rows):
        step.warehouse.register(con, AGG_DAILY_SALES, chunk)
        step.warehouse.register(con, METRIC_GROSS_REVENUE, chunk)
        snapshot_id = step.warehouse.overwrite_sql(spec, con, build(), chunk, step.snapshot_properties())
        record_certification_candidates(step, con, spec, chunk, snapshot_id)
    con.close()
    return dg.MaterializeResult()


_MART_ASSET = dict(
    deps=["agg_daily_sales", "metric_gross_revenue"],
    partitions_def=daily_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    retry_policy=STORAGE_RETRY_POLICY,
    group_name="marts",
    kinds={"iceberg", "duckdb"},
    freshness_policy=MART_FRESHNESS,
)


@dg.asset(owners=["team:finance-data"], metadata=lineage_metadata("mart_finance_daily_sales"), **_MART_ASSET)
@classified
def mart_finance_daily_sales(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource) -> dg.MaterializeResult:
    """Certified finance daily sales: the full control tuple and gross margin per sales_date.

    Grain: sales_date. Revenue is the governed metric; the other figures come
    from agg_daily_sales. Consumers read it only through its certified
    snapshot per partition (``atlasmart status``; never-certified days read as
    absent, not as zeros).
    """
    return _build_mart(context, atlasmart, MART_FINANCE_DAILY_SALES, finance_mart_sql)


@dg.asset(owners=["team:executive-reporting"], metadata=lineage_metadata("mart_executive_revenue"), **_MART_ASSET)
@classified
def mart_executive_revenue(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource) -> dg.MaterializeResult:
    """Certified executive revenue: governed revenue with its channel split, profit, margin, order value.

    Grain: sales_date. revenue_<channel>_usd columns split the governed metric
    by channel and add up to revenue_usd. Read through certified snapshots only.
    """
    return _build_mart(context, atlasmart, MART_EXECUTIVE_REVENUE, executive_mart_sql)
