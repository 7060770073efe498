"""Reconciliation checks between layers: the control tuple must survive every hop.

fact_sales -> agg_daily_sales -> metric_gross_revenue -> marts. Each check
recomputes both sides from the published tables for the run's partitions,
records every partition's result in the ledger, and shows observed vs
expected so a failure explains itself in the UI. All are blocking: nothing
downstream builds, and nothing is certified, past a hop that does not
reconcile.
"""


from decimal import Decimal

import dagster as dg

from ...domain.check_names import (
    AGG_MATCHES_FACT,
    CHANNEL_SPLIT_ADDS_UP,
    MART_MATCHES_AGG_AND_METRIC,
    METRIC_MATCHES_AGG,
)
from ...domain.contracts import CHANNELS
from ...product.published_controls import controls_of, metric_revenue_of
from ...store.tables import AGG_DAILY_SALES, FACT_SALES, MART_EXECUTIVE_REVENUE, MART_FINANCE_DAILY_SALES
from ...store.warehouse import duckdb_connection
from ..assets.step import CheckOutcome, Step
from ..resources import AtlasmartResource
from ..retries import STORAGE_RETRY_POLICY, classified


def _money(value: Decimal) -> str:
    return format(value, "f")


@dg.asset_check(
    asset="agg_daily_sales",
    name=AGG_MATCHES_FACT,
    additional_deps=["fact_sales"],
    blocking=True,
    retry_policy=STORAGE_RETRY_POLICY,
    description="agg_daily_sales carries exactly the control tuple recomputed from fact_sales, per day.",
)
@classified
def agg_matches_fact(context: dg.AssetCheckExecutionContext, atlasmart: AtlasmartResource) -> dg.AssetCheckResult:
    step = Step(context, atlasmart, "agg_daily_sales")
    outcome = CheckOutcome("agg_daily_sales", AGG_MATCHES_FACT, True, "agg controls = fact controls")
    agg = controls_of(step.warehouse, AGG_DAILY_SALES, step.partitions)
    fact = controls_of(step.warehouse, FACT_SALES, step.partitions)
    for p in step.partitions:
        outcome.add(p, agg[p] == fact[p], agg[p].to_json(), fact[p].to_json())
    return step.record_checks([outcome])[0]


@dg.asset_check(
    asset="metric_gross_revenue",
    name=METRIC_MATCHES_AGG,
    additional_deps=["agg_daily_sales"],
    blocking=True,
    retry_policy=STORAGE_RETRY_POLICY,
    description="The governed revenue metric, summed over channels, equals agg_daily_sales.revenue_usd per day.",
)
@classified
def metric_matches_agg(context: dg.AssetCheckExecutionContext, atlasmart: AtlasmartResource) -> dg.AssetCheckResult:
    step = Step(context, atlasmart, "metric_gross_revenue")
    outcome = CheckOutcome("metric_gross_revenue", METRIC_MATCHES_AGG, True, "metric revenue = agg revenue")
    metric = metric_revenue_of(step.warehouse, step.partitions)
    agg = controls_of(step.warehouse, AGG_DAILY_SALES, step.partitions)
    for p in step.partitions:
        outcome.add(
            p,
            metric[p] == agg[p].revenue_usd,
            {"revenue_usd": _money(metric[p])},
            {"revenue_usd": _money(agg[p].revenue_usd)},
        )
    return step.record_checks([outcome])[0]


def _mart_outcome(step: Step, spec) -> CheckOutcome:
    outcome = CheckOutcome(
        spec.name, MART_MATCHES_AGG_AND_METRIC, True, "mart controls = agg controls, mart revenue = governed metric"
    )
    con = duckdb_connection()
    try:
        mart = controls_of(step.warehouse, spec, step.partitions, con=con)
        agg = controls_of(step.warehouse, AGG_DAILY_SALES, step.partitions, con=con)
        metric = metric_revenue_of(step.warehouse, step.partitions, con=con)
    finally:
        con.close()
    for p in step.partitions:
        ok = mart[p] == agg[p] and mart[p].revenue_usd == metric[p]
        outcome.add(
            p,
            ok,
            mart[p].to_json(),
            {**agg[p].to_json(), "governed_revenue_usd": _money(metric[p])},
        )
    return outcome


@dg.asset_check(
    asset="mart_finance_daily_sales",
    name=MART_MATCHES_AGG_AND_METRIC,
    additional_deps=["agg_daily_sales", "metric_gross_revenue"],
    blocking=True,
    retry_policy=STORAGE_RETRY_POLICY,
    description="The finance mart carries the aggregate's control tuple and the governed revenue, per day.",
)
@classified
def finance_mart_reconciles(
    context: dg.AssetCheckExecutionContext, atlasmart: AtlasmartResource
) -> dg.AssetCheckResult:
    step = Step(context, atlasmart, "mart_finance_daily_sales")
    return step.record_checks([_mart_outcome(step, MART_FINANCE_DAILY_SALES)])[0]


@dg.asset_check(
    asset="mart_executive_revenue",
    name=MART_MATCHES_AGG_AND_METRIC,
    additional_deps=["agg_daily_sales", "metric_gross_revenue"],
    blocking=True,
    retry_policy=STORAGE_RETRY_POLICY,
    description="The executive mart carries the aggregate's control tuple and the governed revenue, per day.",
)
@classified
def executive_mart_reconciles(
    context: dg.AssetCheckExecutionContext, atlasmart: AtlasmartResource
) -> dg.AssetCheckResult:
    step = Step(context, atlasmart, "mart_executive_revenue")
    return step.record_checks([_mart_outcome(step, MART_EXECUTIVE_REVENUE)])[0]


@dg.asset_check(
    asset="mart_executive_revenue",
    name=CHANNEL_SPLIT_ADDS_UP,
    blocking=True,
    retry_policy=STORAGE_RETRY_POLICY,
    description="revenue_web_usd + revenue_store_usd + revenue_marketplace_usd = revenue_usd, per day.",
)
@classified
def executive_channel_split_adds_up(
    context: dg.AssetCheckExecutionContext, atlasmart: AtlasmartResource
) -> dg.AssetCheckResult:
    step = Step(context, atlasmart, "mart_executive_revenue")
    outcome = CheckOutcome("mart_executive_revenue", CHANNEL_SPLIT_ADDS_UP, True, "channel revenues add up to revenue")
    con = duckdb_connection()
    try:
        view = step.warehouse.register(con, MART_EXECUTIVE_REVENUE, step.partitions)
        split = " + ".join(f"coalesce(revenue_{c}_usd, 0)" for c in CHANNELS)
        rows = dict(
            (day, (total, parts))
            for day, total, parts in con.sql(
                f"SELECT sales_date::VARCHAR, revenue_usd::VARCHAR, ({split})::DECIMAL(18,2)::VARCHAR FROM {view}"
            ).fetchall()
        )
    finally:
        con.close()
    for p in step.partitions:
        total, parts = rows.get(p, (None, None))
        outcome.add(p, total is not None and total == parts, {"sum_of_channels": parts}, {"revenue_usd": total})
    return step.record_checks([outcome])[0]
