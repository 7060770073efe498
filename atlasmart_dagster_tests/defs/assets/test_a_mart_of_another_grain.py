"""A mart of another grain: revenue by channel per day, read from the fact, certified by the same gate.

``certified_mart(inputs=..., grain in the registry)`` lets a mart name what it reads and hold several rows per
day, as docs/adding-a-mart.md ("A mart of another grain") says. The day's rows add up to the day's control
tuple, so the blocking reconciliation with the aggregate and the governed metric holds them, and a fault that
loses a channel's rows is refused.
"""

from __future__ import annotations

import pytest

from atlasmart_dagster.defs.assets.marts import certified_mart
from atlasmart_dagster.domain.check_names import MART_MATCHES_AGG_AND_METRIC
from atlasmart_dagster.product.access.gateway import Gateway
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.tables import (
    CONTROL_COLUMNS,
    CONTROL_TUPLE,
    FACT_SALES,
    MARTS,
    METRIC_GROSS_REVENUE,
    Column,
    TableSpec,
)
from atlasmart_dagster_tests.environment import env_with_asset

DAYS = ["2026-09-18", "2026-09-20"]  # the sample days with more than one channel, web among them


def _channel_spec(name: str) -> TableSpec:
    return TableSpec(
        name=name,
        layer=MARTS,
        certified=True,
        reconciled_by=MART_MATCHES_AGG_AND_METRIC,
        controls=CONTROL_TUPLE,
        title="Channel daily sales",
        description="The control tuple per day and channel, from the fact; revenue from the governed metric.",
        columns=(Column("sales_date", "DATE"), Column("channel", "VARCHAR")) + CONTROL_COLUMNS,
        grain=("sales_date", "channel"),
    )


def _channel_sql(where: str = "") -> str:
    # revenue per channel from the governed metric (its own grain is day x channel), the rest from the fact
    return f"""
        SELECT f.sales_date, f.channel, count(*)::BIGINT AS paid_lines, count(DISTINCT f.order_id)::BIGINT AS orders,
               sum(f.quantity)::BIGINT AS units, any_value(m.value_usd)::DECIMAL(18,2) AS revenue_usd,
               sum(f.cost_usd)::DECIMAL(18,2) AS cost_usd,
               (any_value(m.value_usd) - sum(f.cost_usd))::DECIMAL(18,2) AS gross_profit_usd
        FROM fact_sales f JOIN metric_gross_revenue m USING (sales_date, channel)
        {where}
        GROUP BY f.sales_date, f.channel
        """


_LINEAGE = {
    "sales_date": [("fact_sales", "sales_date")], "channel": [("fact_sales", "channel")],
    "paid_lines": [("fact_sales", "order_id")], "orders": [("fact_sales", "order_id")],
    "units": [("fact_sales", "quantity")], "revenue_usd": [("metric_gross_revenue", "value_usd")],
    "cost_usd": [("fact_sales", "cost_usd")],
    "gross_profit_usd": [("metric_gross_revenue", "value_usd"), ("fact_sales", "cost_usd")],
}
CHANNEL = _channel_spec("mart_toy_channel_daily_sales")
channel_mart = certified_mart(CHANNEL, owner="team:toy", description=CHANNEL.description, build=_channel_sql,
                              inputs=(FACT_SALES, METRIC_GROSS_REVENUE), lineage=_LINEAGE)

# The same mart losing one channel's rows: its day no longer adds up.
LOSSY = _channel_spec("mart_toy_channel_lossy")
lossy_mart = certified_mart(LOSSY, owner="team:toy", description=LOSSY.description,
                            build=lambda: _channel_sql("WHERE f.channel <> 'web'"),
                            inputs=(FACT_SALES, METRIC_GROSS_REVENUE), lineage=_LINEAGE)


@pytest.fixture
def channel_env(tmp_path):
    yield from env_with_asset(tmp_path, CHANNEL, channel_mart)


@pytest.fixture
def lossy_env(tmp_path):
    yield from env_with_asset(tmp_path, LOSSY, lossy_mart)


def test_a_mart_per_channel_per_day_reads_the_fact_and_is_certified_by_the_same_gate(channel_env):
    env = channel_env
    graph = env.defs.resolve_asset_graph()
    deps = {k.to_user_string() for k in graph.get(channel_mart.key).parent_keys}
    assert deps == {"fact_sales", "metric_gross_revenue"}  # the inputs it names, not the aggregate
    outcome = run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill")
    assert outcome.success, outcome.failures
    for day in DAYS:
        served = env.ledger.partitions.served(CHANNEL.name, day)
        assert served is not None, [d.reasons for d in outcome.decisions if d.asset == CHANNEL.name]
        finance = env.ledger.partitions.served("mart_finance_daily_sales", day)
        assert served.certification.controls == finance.certification.controls  # the day's rows add up
    gateway = Gateway(env.platform)
    days = ", ".join(f"DATE '{day}'" for day in DAYS)
    per_day = gateway.query("bi_reader", f"SELECT sales_date::VARCHAR AS d, count(*) AS n, sum(revenue_usd) AS r "
                                         f"FROM {CHANNEL.name} WHERE sales_date IN ({days}) GROUP BY 1 ORDER BY 1")
    finance = gateway.query("bi_reader", f"SELECT sales_date::VARCHAR AS d, revenue_usd AS r "
                                         f"FROM mart_finance_daily_sales WHERE sales_date IN ({days}) ORDER BY 1")
    per_day, finance = per_day.to_pylist(), finance.to_pylist()
    assert [row["d"] for row in per_day] == DAYS and all(row["n"] > 1 for row in per_day)  # several rows a day
    assert [(row["d"], row["r"]) for row in per_day] == [(row["d"], row["r"]) for row in finance]


def test_a_mart_of_another_grain_that_loses_rows_is_refused(lossy_env):
    env = lossy_env
    outcome = run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill")
    assert not outcome.success
    for day in DAYS:
        assert env.ledger.partitions.served(LOSSY.name, day) is None
        failed = [r for r in env.ledger.checks.results(partitions=[day])
                  if r["asset"] == LOSSY.name and r["check_name"] == MART_MATCHES_AGG_AND_METRIC]
        assert failed and not failed[-1]["passed"]
