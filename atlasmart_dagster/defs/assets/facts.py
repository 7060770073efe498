"""Fact layer: fact_sales, one current accepted paid order line per (order_id, line_no)."""


import dagster as dg

from ...domain.check_names import FACT_MATCHES_STAGING, GRAIN_UNIQUE, NO_NEGATIVE_MONEY
from ...domain.contracts import PAID_STATUS
from ...domain.controls import FACT_CONTROL_COLUMNS, FACT_CONTROLS_SQL, ControlTuple, controls_by_date
from ...store.tables import FACT_SALES, STG_ORDER_LINES
from ...store.warehouse import duckdb_connection, plan_chunks
from ...transforms.facts import fact_sales_sql
from ..resources import AtlasmartResource
from ..retries import classified
from .asset_args import DAILY_ASSET_ARGS, blocking_check, table_asset_args
from .step import CheckOutcome, Step


@dg.asset(
    **table_asset_args(FACT_SALES, deps=[STG_ORDER_LINES.name], owners=["team:data-platform"]),
    **DAILY_ASSET_ARGS,
    check_specs=[
        blocking_check(GRAIN_UNIQUE, FACT_SALES, "(order_id, line_no) is unique within the day."),
        blocking_check(NO_NEGATIVE_MONEY, FACT_SALES, "revenue_usd and cost_usd are never negative."),
        blocking_check(FACT_MATCHES_STAGING, FACT_SALES, "Published fact controls equal the current paid lines in staging."),
    ],
)
@classified
def fact_sales(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource):
    """Sales facts: one current, accepted, paid order line per (order_id, line_no) and day.

    Grain: (sales_date, order_id, line_no). revenue_usd is the line amount,
    cost_usd the line cost, gross_profit_usd their difference. Rebuilt whole
    per day from staging; the published rows are read back and reconciled
    against staging before the step succeeds.
    """
    step = Step(context, atlasmart, FACT_SALES.name)
    grain = CheckOutcome(FACT_SALES.name, GRAIN_UNIQUE, True, "(order_id, line_no) unique per day")
    money = CheckOutcome(FACT_SALES.name, NO_NEGATIVE_MONEY, True, "no negative revenue or cost")
    matches = CheckOutcome(FACT_SALES.name, FACT_MATCHES_STAGING, True, "fact controls = staged current paid lines")
    counts = step.warehouse.partition_row_counts(STG_ORDER_LINES, step.partitions)
    per_partition = {}
    con = duckdb_connection()
    for chunk in plan_chunks(counts, step.platform.chunk_rows):
        step.warehouse.register(con, STG_ORDER_LINES, chunk)
        # Each day's fact comes from that day's staged file alone: written day by day, as a day alone
        # is, with no staged copy of the chunk's 2M rows to store and read again.
        days = {p: fact_sales_sql(f"({step.warehouse.relation_sql(STG_ORDER_LINES, [p])})") for p in chunk}
        snapshot_id = step.warehouse.overwrite_sql(FACT_SALES, con, days, chunk, step.snapshot_properties())

        # Reconcile what was *published* (read back at the new snapshot) with staging.
        published = step.warehouse.register(con, FACT_SALES, chunk, snapshot_id, name="published_fact")
        # one scan of the published rows for the controls, the grain and the money rules
        observed, dups, negative = {}, {}, {}
        for day, *controls, dup, neg in con.sql(
            f"SELECT sales_date::VARCHAR, {FACT_CONTROL_COLUMNS}, "
            f"count(*) - count(DISTINCT (order_id, line_no)), count(*) FILTER (WHERE revenue_usd < 0 OR cost_usd < 0) "
            f"FROM {published} GROUP BY 1"
        ).fetchall():
            observed[day], dups[day], negative[day] = ControlTuple(*controls), dup, neg
        expected = controls_by_date(
            con,
            FACT_CONTROLS_SQL,
            f"(SELECT sales_date, order_id, quantity, line_amount_usd AS revenue_usd, line_cost_usd AS cost_usd, "
            f"line_amount_usd - line_cost_usd AS gross_profit_usd FROM stg_order_lines "
            f"WHERE is_current AND status = '{PAID_STATUS}')",
        )
        with step.ledger.transaction():
            for partition in chunk:
                got, want = observed.get(partition, ControlTuple()), expected.get(partition, ControlTuple())
                grain.add(partition, dups.get(partition, 0) == 0, {"duplicate_keys": dups.get(partition, 0)}, {"duplicate_keys": 0})
                money.add(partition, negative.get(partition, 0) == 0, {"negative_rows": negative.get(partition, 0)}, {"negative_rows": 0})
                matches.add(partition, got == want, got.to_json(), want.to_json())
                step.record_built(partition, snapshot_id, controls=got)
                per_partition[partition] = {"controls": str(got), "paid_lines": got.paid_lines, "snapshot_id": str(snapshot_id)}
                step.log_partition(partition, "ok" if got == want else "mismatch", rows=got.paid_lines, controls=got.to_json())
    con.close()
    step.add_partition_metadata(per_partition)
    yield dg.MaterializeResult()
    yield from step.report_checks([grain, money, matches])
