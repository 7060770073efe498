"""Mart layer: certified marts for finance and executives, built from the governed metric.

``certified_mart`` makes a mart's asset from its spec in the table registry,
its SQL, the inputs it reads and the checks beyond the reconciliation every
mart has; a new mart, of one row per day or of a finer grain, is one call of
it (docs/adding-a-mart.md).
"""


from datetime import timedelta
from typing import Callable, Sequence

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
from ..resources import AtlasmartResource
from ..retries import classified
from .asset_args import DAILY_ASSET_ARGS, table_asset_args
from .certification_candidates import record_certification_candidates
from .reconciliation import (
    CHANNEL_SPLIT_ADDS_UP_SPEC,
    channel_split_adds_up,
    mart_matches_agg_and_metric,
    mart_matches_agg_and_metric_spec,
)
from .step import CheckOutcome, Step

# A check beyond the mart's reconciliation, and what evaluates it in the mart's step.
MartCheck = tuple[dg.AssetCheckSpec, Callable[[Step], CheckOutcome]]

# For the UI only: Dagster evaluates freshness on the newest materialization of
# any partition. Per-partition SLOs are measured by AtlasMart (see product/slo.py).
MART_FRESHNESS = dg.FreshnessPolicy.cron(
    deadline_cron="30 8 * * *", lower_bound_delta=timedelta(hours=24), timezone="UTC"
)


def _mart_step(context, atlasmart: AtlasmartResource, spec: TableSpec, inputs: Sequence[TableSpec], build, checks):
    """Build the mart (when selected), then evaluate its selected checks on what was published.

    Each chunk of days registers every input under its own name for ``build()``'s SQL; chunks are planned on
    the rows all inputs hold per day, so a mart over the fact is as memory-bounded as one over the aggregate.
    """
    step = Step(context, atlasmart, spec.name)
    if step.builds:
        counts: dict[str, int] = {}
        for source in inputs:
            for day, rows in step.warehouse.partition_row_counts(source, step.partitions).items():
                counts[day] = counts.get(day, 0) + rows
        con = duckdb_connection()
        for chunk in plan_chunks(counts, step.platform.chunk_rows):
            for source in inputs:
                step.warehouse.register(con, source, chunk)
            snapshot_id = step.warehouse.overwrite_sql(spec, con, build(), chunk, step.snapshot_properties())
            record_certification_candidates(step, con, spec, chunk, snapshot_id)
        con.close()
        yield dg.MaterializeResult()
    outcomes = [evaluate(step) for check_spec, evaluate in checks if step.runs_check(check_spec.name)]
    if outcomes:
        yield from step.report_checks(outcomes)


def certified_mart(
    table: TableSpec,
    *,
    owner: str,
    description: str,
    build: Callable[[], str],
    inputs: Sequence[TableSpec] = (AGG_DAILY_SALES, METRIC_GROSS_REVENUE),
    checks: Sequence[MartCheck] = (),
    lineage: dict[str, list[tuple[str, str]]] | None = None,
) -> dg.AssetsDefinition:
    """The asset of a certified mart: ``build()`` is its SQL over ``inputs`` (by default ``agg_daily_sales``
    and the governed metric), each registered under its table name.

    The mart's grain is its registry spec's ``grain``: one row per day, or several (per channel, per
    region...), whose six control columns add up to the day's. Every mart carries the control tuple and is
    reconciled in its own step with the aggregate and the governed metric, summed per day
    (``mart_matches_agg_and_metric``, blocking), then with ``checks``; the certification gate certifies it
    per day from what those checks recorded (``table.certified``).
    """
    if not inputs:
        raise ValueError(f"{table.name}: a mart is built from at least one input")
    reconciles = mart_matches_agg_and_metric_spec(table)
    evaluated: list[MartCheck] = [(reconciles, lambda step: mart_matches_agg_and_metric(step, table)), *checks]

    @dg.multi_asset(
        name=table.name,
        specs=[
            dg.AssetSpec(
                table.name,
                **table_asset_args(table, deps=[source.name for source in inputs], owners=[owner],
                                   lineage=lineage),
                description=description,
                freshness_policy=MART_FRESHNESS,
            )
        ],
        check_specs=[spec for spec, _ in evaluated],
        can_subset=True,  # its checks alone re-read what is published
        **DAILY_ASSET_ARGS,
    )
    @classified
    def mart(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource):
        yield from _mart_step(context, atlasmart, table, inputs, build, evaluated)

    return mart


mart_finance_daily_sales = certified_mart(
    MART_FINANCE_DAILY_SALES,
    owner="team:finance-data",
    description=(
        "Certified finance daily sales: the full control tuple and gross margin per sales_date. Grain: sales_date. "
        "Revenue is the governed metric; the other figures come from agg_daily_sales. Consumers read it only through "
        "its certified snapshot per partition (atlasmart status; never-certified days read as absent, not as zeros)."
    ),
    build=finance_mart_sql,
)

mart_executive_revenue = certified_mart(
    MART_EXECUTIVE_REVENUE,
    owner="team:executive-reporting",
    description=(
        "Certified executive revenue: governed revenue with its channel split, profit, margin, order value. "
        "Grain: sales_date. revenue_<channel>_usd columns split the governed metric by channel and add up to "
        "revenue_usd. Read through certified snapshots only."
    ),
    build=executive_mart_sql,
    checks=[(CHANNEL_SPLIT_ADDS_UP_SPEC, channel_split_adds_up)],
)
