"""Adding a mart: a toy mart declared through the table registry and one asset call reaches every place a mart must.

The toy mart lives only in this module (its spec, its SQL and its asset), as
docs/adding-a-mart.md says a new mart is written. Registered for the test,
it is in the daily job, certified by the gate per day, listed by
``atlasmart controls``, pinned by maintenance and granted to consumers by the
access policy, with no other list edited. A toy mart whose figures are wrong
is refused by the same gate: the registry does not wave a new mart through.
"""

from __future__ import annotations

import json

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.defs.assets.marts import certified_mart
from atlasmart_dagster.domain.check_names import MART_MATCHES_AGG_AND_METRIC
from atlasmart_dagster.domain.controls import CONTROL_FIELDS
from atlasmart_dagster.product.access.gateway import Gateway
from atlasmart_dagster.product.access.policy import CERTIFIED, ROLES, AccessDenied
from atlasmart_dagster.ops.recovery.maintenance import protected_snapshots
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.tables import (
    CERTIFIED_ASSETS,
    CONTROL_ASSETS,
    CONTROL_COLUMNS,
    CONTROL_TUPLE,
    DAILY_CHAIN,
    MARTS,
    Column,
    TableSpec,
)
from atlasmart_dagster_tests.environment import env_with_asset

DAYS = ["2026-09-17", "2026-09-18"]


def _toy_spec(name: str) -> TableSpec:
    return TableSpec(
        name=name,
        layer=MARTS,
        certified=True,
        reconciled_by=MART_MATCHES_AGG_AND_METRIC,
        controls=CONTROL_TUPLE,
        title="Toy daily sales",
        description="A toy mart: the control tuple per day, revenue from the governed metric.",
        columns=(Column("sales_date", "DATE"),) + CONTROL_COLUMNS,
        grain=("sales_date",),
    )


def _toy_sql(units: str = "a.units") -> str:
    return f"""
        SELECT a.sales_date, a.paid_lines, a.orders, {units} AS units, r.revenue_usd, a.cost_usd, a.gross_profit_usd
        FROM agg_daily_sales a
        JOIN (SELECT sales_date, sum(value_usd)::DECIMAL(18,2) AS revenue_usd FROM metric_gross_revenue GROUP BY 1) r
        USING (sales_date)
        """


TOY = _toy_spec("mart_toy_daily_sales")
_LINEAGE = {c: [("agg_daily_sales", c)] for c in ("sales_date", *CONTROL_FIELDS) if c != "revenue_usd"}
_LINEAGE["revenue_usd"] = [("metric_gross_revenue", "value_usd")]
toy_mart = certified_mart(TOY, owner="team:toy", description=TOY.description, build=_toy_sql, lineage=_LINEAGE)

# The same mart with a fault in its SQL: every day's units doubled.
WRONG = _toy_spec("mart_toy_wrong_units")
wrong_mart = certified_mart(WRONG, owner="team:toy", description=WRONG.description,
                            build=lambda: _toy_sql("a.units * 2"), lineage=_LINEAGE)


def _env_with(tmp_path, spec: TableSpec, asset):
    yield from env_with_asset(tmp_path, spec, asset)
    assert spec.name not in CERTIFIED_ASSETS  # the registry is back as the package declares it


@pytest.fixture
def toy_env(tmp_path):
    yield from _env_with(tmp_path, TOY, toy_mart)


@pytest.fixture
def wrong_env(tmp_path):
    yield from _env_with(tmp_path, WRONG, wrong_mart)


def test_a_toy_mart_reaches_the_job_the_gate_controls_maintenance_and_access(toy_env, capsys):
    env = toy_env
    # the job: the daily chain selects it (by the chain tag its asset arguments carry)
    job_assets = {k.to_user_string() for k in env.defs.resolve_job_def("daily_sales_job").asset_layer.selected_asset_keys}
    assert TOY.name in job_assets and TOY.name in DAILY_CHAIN
    outcome = run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill")

    # the certification gate: certified per day, at the snapshot the run built, with the fact's controls
    ledger = env.ledger
    for day in DAYS:
        served = ledger.partitions.served(TOY.name, day)
        assert served is not None, [d.reasons for d in outcome.decisions if d.asset == TOY.name]
        finance = ledger.partitions.served("mart_finance_daily_sales", day)
        assert served.certification.controls == finance.certification.controls

    # `atlasmart controls`: accepted as an asset, published = certified
    assert TOY.name in CONTROL_ASSETS
    capsys.readouterr()
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", "--json",
                 "controls", "--asset", TOY.name])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)["partitions"]
    assert [r["partition"] for r in rows if r["certified"]] == DAYS
    assert all(r["published"] == r["certified"] for r in rows if r["certified"])

    # maintenance: the served snapshot of every day is protected from expiry
    protected = protected_snapshots(env.platform)[TOY.name]
    assert {ledger.partitions.served(TOY.name, d).certification.snapshot_id for d in DAYS} <= protected

    # the access policy: consumers read it certified, the pipeline's service identity does not read it
    assert ROLES["bi_reader"].readable[TOY.name].version == CERTIFIED
    assert TOY.name not in ROLES["etl_service"].readable
    total = Gateway(env.platform).query("bi_reader", f"SELECT sum(units) AS u FROM {TOY.name}").column("u").to_pylist()
    finance = Gateway(env.platform).query("bi_reader", "SELECT sum(units) AS u FROM mart_finance_daily_sales")
    assert total == finance.column("u").to_pylist()
    with pytest.raises(AccessDenied):
        Gateway(env.platform).query("etl_service", f"SELECT * FROM {TOY.name}")


def test_a_toy_mart_with_wrong_figures_is_refused_by_the_same_gate(wrong_env):
    env = wrong_env
    outcome = run_chain(env.defs, env.instance, env.platform, DAYS, lane="backfill")
    assert not outcome.success  # its blocking reconciliation failed in the run
    ledger = env.ledger
    for day in DAYS:
        assert ledger.partitions.served(WRONG.name, day) is None
        failed = [r for r in ledger.checks.results(partitions=[day])
                  if r["asset"] == WRONG.name and r["check_name"] == MART_MATCHES_AGG_AND_METRIC]
        assert failed and not failed[-1]["passed"]
