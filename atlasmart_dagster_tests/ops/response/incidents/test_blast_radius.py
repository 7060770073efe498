"""`atlasmart blast-radius --field`: value lineage, the whole day for a required field, dimensions and their readers."""

import json

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster_tests.environment import Env

DAY_CHAIN = {"raw_order_lines", "stg_order_lines", "quarantine_order_lines", "fact_sales", "agg_daily_sales",
             "metric_gross_revenue", "mart_finance_daily_sales", "mart_executive_revenue",
             "dashboard_finance_daily_sales", "dashboard_executive_revenue", "consumer_group_finance",
             "consumer_group_executives"}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return Env(tmp_path_factory.mktemp("radius"))


def radius(env, capsys, field: str) -> dict:
    code = main(["--home", str(env.home), "--landing", str(env.landing), "blast-radius", "--field", field, "--json"])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def by_asset(data: dict) -> dict[str, dict]:
    return {a["asset"]: a for a in data["assets"]}


@pytest.mark.parametrize("field", ["email", "full_name", "dim_customer.email"])
def test_a_customer_pii_field_reaches_the_customer_dimension_and_no_reader(env, capsys, field):
    data = radius(env, capsys, field)
    assets = by_asset(data)
    assert set(assets) == {"dim_customer"}  # nothing in the day's chain is built from the reference extract
    assert assets["dim_customer"]["columns"] == [field.rpartition(".")[2]]
    assert data["owners"] == ["team:data-platform"]
    assert data["readers"] == []  # no role may read customer PII


def test_a_reference_field_reaches_the_roles_that_read_it(env, capsys):
    data = radius(env, capsys, "region")
    assert set(by_asset(data)) == {"dim_customer"}
    assert {(r["relation"], r["role"]) for r in data["readers"]} >= {("dim_customer", "finance_analyst")}


def test_a_required_field_takes_down_the_whole_day_and_links_its_dimension(env, capsys):
    data = radius(env, capsys, "customer_id")
    assets = by_asset(data)
    assert DAY_CHAIN <= set(assets) and "dim_customer" in assets
    assert assets["fact_sales"]["columns"] == ["customer_id"]  # the value lineage stays visible
    assert assets["agg_daily_sales"]["columns"] == [] and "the whole day stops (required field)" in assets["agg_daily_sales"]["impact"]
    assert assets["dim_customer"]["columns"] == ["customer_id"]
    assert set(data["consumer_groups"]) == {"consumer_group_finance", "consumer_group_executives"}
    assert {"team:finance", "team:executive-office", "team:data-platform"} <= set(data["owners"])


def test_channel_columns_and_the_whole_day(env, capsys):
    assets = by_asset(radius(env, capsys, "channel"))
    assert assets["fact_sales"]["columns"] == ["channel"]
    assert assets["agg_daily_sales"]["columns"] == []  # the aggregate drops channel, but the day stops whole
    assert DAY_CHAIN <= set(assets)


def test_an_unknown_field_is_an_error(env, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--home", str(env.home), "--landing", str(env.landing), "blast-radius", "--field", "line_amount"])
    assert "unknown source field 'line_amount'" in str(exc.value.code) and "line_amount_usd" in str(exc.value.code)
