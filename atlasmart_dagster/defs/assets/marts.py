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
from ..checks.reconciliation_checks import (
    CHANNEL_SPLIT_ADDS_UP_SPEC,
    channel_split_adds_up,
    mart_matches_agg_and_metric,
    mart_matches_agg_and_metric_spec,
)
from ..lineage import lineage_metadata
from ..partitions import BACKFILL_POLICY, daily_partitions
from ..resources import AtlasmartResource
from ..retries import STORAGE_RETRY_POLICY, classified
from .certification_candidates import record_certification_candidates
from .step import Step

# For the UI only: Dagster evaluates freshness on the newest materialization of
# any partition. Per-partition SLOs are measured by AtlasMart (see product/slo.py).
MART_FRESHNESS = dg.FreshnessPolicy.cron(
    deadline_cron="30 8 * * *", lower_bound_delta=timedelta(hours=24), timezone="UTC"
)


def _mart_step(context, atlasmart: AtlasmartResource, spec: TableSpec, build, checks):
    """Build the mart (when selected), then evaluate its selected checks on what was published."""
    step = Step(context, atlasmart, spec.name)
    if step.builds:
        counts = step.warehouse.partition_row_counts(AGG_DAILY_SALES, step.partitions)
        con = duckdb_connection()
        for chunk in plan_chunks(counts, step.platform.chunk_rows):
            step.warehouse.register(con, AGG_DAILY_SALES, chunk)
            step.warehouse.register(con, METRIC_GROSS_REVENUE, chunk)
            snapshot_id = step.warehouse.overwrite_sql(spec, con, build(), chunk, step.snapshot_properties())
            record_certification_candidates(step, con, spec, chunk, snapshot_id)
        con.close()
        yield dg.MaterializeResult()
    outcomes = [evaluate(step) for check_spec, evaluate in checks if step.runs_check(check_spec.name)]
    if outcomes:
        yield from step.report_checks(outcomes)


def _mart(name: str, owner: str, description: str, check_specs: list[dg.AssetCheckSpec]):
    return dg.multi_asset(
        specs=[
            dg.AssetSpec(
                name,
                deps=["agg_daily_sales", "metric_gross_revenue"],
                description=description,
                group_name="marts",
                kinds={"iceberg", "duckdb"},
                owners=[owner],
                metadata=lineage_metadata(name),
                freshness_policy=MART_FRESHNESS,
            )
        ],
        check_specs=check_specs,
        can_subset=True,  # its checks alone re-read what is published
        partitions_def=daily_partitions,
        backfill_policy=BACKFILL_POLICY,
        retry_policy=STORAGE_RETRY_POLICY,
    )


_FINANCE_RECONCILES = mart_matches_agg_and_metric_spec(MART_FINANCE_DAILY_SALES.name)
_EXECUTIVE_RECONCILES = mart_matches_agg_and_metric_spec(MART_EXECUTIVE_REVENUE.name)


@_mart(
    MART_FINANCE_DAILY_SALES.name,
    "team:finance-data",
    "Certified finance daily sales: the full control tuple and gross margin per sales_date. Grain: sales_date. "
    "Revenue is the governed metric; the other figures come from agg_daily_sales. Consumers read it only through "
    "its certified snapshot per partition (atlasmart status; never-certified days read as absent, not as zeros).",
    [_FINANCE_RECONCILES],
)
@classified
def mart_finance_daily_sales(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource):
    """Build the finance mart, then reconcile it with the aggregate and the governed metric."""
    yield from _mart_step(
        context, atlasmart, MART_FINANCE_DAILY_SALES, finance_mart_sql,
        [(_FINANCE_RECONCILES, lambda step: mart_matches_agg_and_metric(step, MART_FINANCE_DAILY_SALES))],
    )


@_mart(
    MART_EXECUTIVE_REVENUE.name,
    "team:executive-reporting",
    "Certified executive revenue: governed revenue with its channel split, profit, margin, order value. "
    "Grain: sales_date. revenue_<channel>_usd columns split the governed metric by channel and add up to "
    "revenue_usd. Read through certified snapshots only.",
    [_EXECUTIVE_RECONCILES, CHANNEL_SPLIT_ADDS_UP_SPEC],
)
@classified
def mart_executive_revenue(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource):
    """Build the executive mart, then reconcile it and check that its channel split adds up."""
    yield from _mart_step(
        context, atlasmart, MART_EXECUTIVE_REVENUE, executive_mart_sql,
        [
            (_EXECUTIVE_RECONCILES, lambda step: mart_matches_agg_and_metric(step, MART_EXECUTIVE_REVENUE)),
            (CHANNEL_SPLIT_ADDS_UP_SPEC, channel_split_adds_up),
        ],
    )
