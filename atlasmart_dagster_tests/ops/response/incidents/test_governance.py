"""Gaps closed around incidents: hand-written revenue tiles, undelivered days, postmortem dates, containment without a hold."""

import json

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.domain.check_names import GOLDEN_MATCHES_GOVERNED_METRIC
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.dashboards import EXECUTIVE_DASHBOARD, Dashboard, Tile
from atlasmart_dagster.product.run_certification import certify_run
from atlasmart_dagster.product.slo import latest_results
from atlasmart_dagster.store.clock import RUN_FINISHED, RUN_STARTED, LogicalClock
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env

DAY = "2026-09-21"
ONCALL = "oncall@atlasmart.example"


def cli(env, capsys, *args, clock="logical"):
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--clock", clock, "--ephemeral-instance",
                 *args])
    return code, capsys.readouterr().out


def test_a_hand_written_revenue_tile_without_the_flag_is_golden_checked_and_not_called_governed(tmp_path, capsys):
    env = Env(tmp_path)
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").success
    # "Revenue (USD)" computed by hand, leaving out marketplace, and not flagged as the governed metric
    tiles = tuple(Tile(t.key, t.title, "SELECT sales_date, revenue_web_usd + revenue_store_usd AS value "
                                       "FROM mart_executive_revenue") if t.governed_metric else t
                  for t in EXECUTIVE_DASHBOARD.tiles)
    (tmp_path / "dashboard.json").write_text(json.dumps(
        Dashboard(EXECUTIVE_DASHBOARD.asset, EXECUTIVE_DASHBOARD.title, "1.2.0", tiles).to_json()))
    code, out = cli(env, capsys, "dashboard", "deploy", "--file", str(tmp_path / "dashboard.json"), clock="system")
    assert "compiled from governed metric: False" in out and "NOT governed: tile 'gross_revenue_usd'" in out
    code, out = cli(env, capsys, "dashboard", "check", clock="system")
    refused = {d["partition"] for d in json.loads(out) if d["asset"] == EXECUTIVE_DASHBOARD.asset and not d["certified"]}
    assert refused == {"2026-09-17", "2026-09-18"}  # the days with marketplace sales
    failed = {r["partition"] for r in env.ledger.checks.results(asset=EXECUTIVE_DASHBOARD.asset)
              if r["check_name"] == GOLDEN_MATCHES_GOVERNED_METRIC and not r["passed"]}
    assert failed == refused
    code, out = cli(env, capsys, "dashboard", "restore", EXECUTIVE_DASHBOARD.asset, clock="system")
    assert "compiled from governed metric: True" in out and "NOT governed" not in out


def test_an_undelivered_day_records_its_availability_miss_once_the_deadline_passed(tmp_path, capsys):
    env = Env(tmp_path, clock="logical")
    clock = LogicalClock(env.home / "clock.json")
    manifest = env.day_dir(DAY) / "_manifest.json"
    withheld = tmp_path / "withheld.json"
    manifest.rename(withheld)
    clock.set("2026-09-22T08:00:00Z")
    assert not run_chain(env.defs, env.instance, env.platform, [DAY], lane="current").success  # blocked upstream
    clock.set("2026-09-22T08:25:00Z")
    cli(env, capsys, "incident", "detect", "--json")
    assert env.ledger.slos.records(DAY) == []  # not due yet
    clock.set("2026-09-22T08:40:00Z")
    code, out = cli(env, capsys, "incident", "detect", "--json")
    (miss,) = env.ledger.slos.records(DAY)
    assert (miss["objective"], miss["met"], miss["value"], miss["missed_by"]) == ("availability", False, 40, 10)
    (incident_id,) = [i["id"] for i in json.loads(cli(env, capsys, "incident", "list", "--json")[1])]
    shown = json.loads(cli(env, capsys, "incident", "show", incident_id, "--json")[1])
    assert "slo_missed" in [s["kind"] for s in shown["signals"]]
    code, out = cli(env, capsys, "status", "--partition", DAY, "--json")
    assert [(s["objective"], s["met"]) for s in json.loads(out)[0]["slo"]] == [("availability", False)]

    # the late delivery is still measured as the day's first delivery
    data = json.loads(withheld.read_text()) | {"ready_at": "2026-09-22T09:05:00Z"}
    manifest.write_text(json.dumps(data))
    clock.set("2026-09-22T09:06:00Z", {RUN_STARTED: "2026-09-22T09:06:00Z", RUN_FINISHED: "2026-09-22T09:14:00Z"})
    outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="current", certify=False)
    clock.set("2026-09-22T09:18:00Z")
    certify_run(env.platform, outcome.run_id, outcome.success)
    latest = {r.objective: r for r in latest_results(env.ledger, DAY)}
    assert (latest["availability"].value, latest["availability"].missed_by) == (78, 48)
    assert set(latest) == {"freshness", "completeness", "duration", "availability"}


@pytest.fixture
def reported(tmp_path, capsys):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")
    code, out = cli(env, capsys, "incident", "report", "--actor", "cfo@atlasmart.example", "--partition", "2026-09-19",
                    "--text", "revenue of the 19th looks low", "--json")
    env.incident = json.loads(out)["incident"]
    return env


def test_a_postmortem_action_due_before_the_incident_opened_is_refused(reported, capsys):
    with pytest.raises(SystemExit, match=r"a due date on or after the day the incident opened \(2026-09-22\)"):
        cli(reported, capsys, "incident", "postmortem", reported.incident, "--owner", "team:data-platform",
            "--due", "2026-09-21", "--gap", "no alert", "--verification", "a drill pages")
    code, out = cli(reported, capsys, "incident", "postmortem", reported.incident, "--owner", "team:data-platform",
                    "--due", "2026-09-22", "--gap", "no alert", "--verification", "a drill pages", "--json")
    assert code == 0 and json.loads(out)["action_id"]


def test_contain_without_holding_correct_late_data(reported, capsys):
    code, out = cli(reported, capsys, "incident", "contain", reported.incident, "--no-hold", "--actor", ONCALL)
    assert code == 0 and "certification NOT held" in out
    assert reported.ledger.holds.active() == []
    shown = json.loads(cli(reported, capsys, "incident", "show", reported.incident, "--json")[1])
    assert shown["status"] == "contained" and shown["containment"]["hold_id"] is None
