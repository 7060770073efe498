"""In-step reconciliation between layers: the control tuple must survive every hop.

fact_sales -> agg_daily_sales -> metric_gross_revenue -> marts. Each check
runs in the step of the asset it guards, after the asset is published:
it recomputes both sides from the published tables for the run's
partitions, records every partition's result in the ledger, and shows
observed vs expected so a failure explains itself in the UI. All are
blocking: the step fails, nothing downstream builds, and nothing is
certified, past a hop that does not reconcile. Executed alone (an asset's
*Execute checks*, or ``run_checks``), a check reads what is published and
builds nothing. They live beside the assets whose steps run them.
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
from ...store.tables import AGG_DAILY_SALES, FACT_SALES, MART_EXECUTIVE_REVENUE, METRIC_GROSS_REVENUE, TableSpec
from ...store.warehouse import duckdb_connection
from .asset_args import blocking_check
from .step import CheckOutcome, Step

AGG_MATCHES_FACT_SPEC = blocking_check(
    AGG_MATCHES_FACT, AGG_DAILY_SALES,
    "agg_daily_sales carries exactly the control tuple recomputed from fact_sales, per day.",
)
METRIC_MATCHES_AGG_SPEC = blocking_check(
    METRIC_MATCHES_AGG, METRIC_GROSS_REVENUE,
    "The governed revenue metric, summed over channels, equals agg_daily_sales.revenue_usd per day.",
)


def mart_matches_agg_and_metric_spec(mart: TableSpec) -> dg.AssetCheckSpec:
    return blocking_check(
        MART_MATCHES_AGG_AND_METRIC, mart,
        f"{mart.title} carries the aggregate's control tuple and the governed revenue, per day.",
    )


CHANNEL_SPLIT_ADDS_UP_SPEC = blocking_check(
    CHANNEL_SPLIT_ADDS_UP, MART_EXECUTIVE_REVENUE,
    " + ".join(f"revenue_{c}_usd" for c in CHANNELS) + " = revenue_usd, per day.",
)


def _money(value: Decimal) -> str:
    return format(value, "f")


def agg_matches_fact(step: Step) -> CheckOutcome:
    outcome = CheckOutcome(AGG_DAILY_SALES.name, AGG_MATCHES_FACT, True, "agg controls = fact controls")
    agg = controls_of(step.warehouse, AGG_DAILY_SALES, step.partitions)
    fact = controls_of(step.warehouse, FACT_SALES, step.partitions)
    for p in step.partitions:
        outcome.add(p, agg[p] == fact[p], agg[p].to_json(), fact[p].to_json())
    return outcome


def metric_matches_agg(step: Step) -> CheckOutcome:
    outcome = CheckOutcome(METRIC_GROSS_REVENUE.name, METRIC_MATCHES_AGG, True, "metric revenue = agg revenue")
    metric = metric_revenue_of(step.warehouse, step.partitions)
    agg = controls_of(step.warehouse, AGG_DAILY_SALES, step.partitions)
    for p in step.partitions:
        outcome.add(
            p,
            metric[p] == agg[p].revenue_usd,
            {"revenue_usd": _money(metric[p])},
            {"revenue_usd": _money(agg[p].revenue_usd)},
        )
    return outcome


def mart_matches_agg_and_metric(step: Step, spec: TableSpec) -> CheckOutcome:
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


def channel_split_adds_up(step: Step) -> CheckOutcome:
    outcome = CheckOutcome(MART_EXECUTIVE_REVENUE.name, CHANNEL_SPLIT_ADDS_UP, True, "channel revenues add up to revenue")
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
    return outcome
