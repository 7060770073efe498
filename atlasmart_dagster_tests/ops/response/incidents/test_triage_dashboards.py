"""Triage asks the semantic layer for a disputed dashboard figure (issue 35, finding 4).

A report disputing a dashboard is answered with the first question of triage
by mechanism for a figure: does the dashboard show the governed metric? The
golden check's comparison is computed for the reported day and its newest
recorded result quoted beside it.
"""

import json

import pytest

from atlasmart_dagster.ops.runs.chains import run_chain, run_golden_checks
from atlasmart_dagster.product.dashboards import FINANCE_DASHBOARD, Dashboard, Tile
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import Env

from .test_restatement_incident import cli

DAY = "2026-09-18"
DASHBOARD = FINANCE_DASHBOARD.asset


@pytest.fixture
def certified(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T07:00:00Z")
    days = ["2026-09-17", DAY, "2026-09-19"]
    assert run_chain(env.defs, env.instance, env.platform, days, lane="backfill").certified == days
    run_golden_checks(env.defs, env.instance, env.platform, "certification_sensor", "CRITICAL")
    return env


def report_and_triage(env, capsys) -> dict:
    code, out = cli(env, capsys, "incident", "report", "--actor", "finance-analyst@atlasmart.example", "--json",
                    "--asset", DASHBOARD, "--partition", DAY, "--text", "The finance dashboard's revenue looks low")
    assert code == 0, out
    incident = json.loads(out)["incident"]
    code, out = cli(env, capsys, "incident", "triage", incident, "--json")
    assert code == 0, out
    return json.loads(out)["triage"]


def test_a_disputed_dashboard_that_shows_the_governed_metric_is_said_to_match(certified, capsys):
    triage = report_and_triage(certified, capsys)
    (line,) = triage["dashboards"][DAY]
    assert "dashboard matches the governed metric (" in line and DASHBOARD in line
    assert "its golden check of" in line and "passed" in line
    assert line in triage["against"]["semantic error"]
    assert triage["verdict"] != "semantic error"


def test_a_disputed_dashboard_that_drops_a_channel_differs_and_is_a_semantic_error(certified, capsys):
    tiles = tuple(Tile(t.key, t.title, "SELECT sales_date, revenue_web_usd + revenue_store_usd AS value "
                                       "FROM mart_executive_revenue") if t.governed_metric else t
                  for t in FINANCE_DASHBOARD.tiles)
    broken = certified.root / "dashboard.json"
    broken.write_text(json.dumps(Dashboard(DASHBOARD, FINANCE_DASHBOARD.title, "1.1.0", tiles).to_json()))
    assert cli(certified, capsys, "dashboard", "deploy", DASHBOARD, "--file", str(broken), "--reason", "faster")[0] == 0
    triage = report_and_triage(certified, capsys)
    (line,) = triage["dashboards"][DAY]
    assert "dashboard differs: Revenue (USD) shows " in line and ", the governed metric is " in line
    assert triage["verdict"] == "semantic error"
    assert any(e.startswith(line) for e in triage["evidence"]["semantic error"])


def test_the_triage_text_names_the_dashboard_comparison(certified, capsys):
    code, out = cli(certified, capsys, "incident", "report", "--actor", "finance-analyst@atlasmart.example", "--json",
                    "--asset", DASHBOARD, "--partition", DAY, "--text", "revenue looks low")
    code, out = cli(certified, capsys, "incident", "triage", json.loads(out)["incident"])
    assert "dashboard matches the governed metric (" in out, out
