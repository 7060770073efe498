"""`atlasmart incident ...` on a real incident: a corrupted aggregate caught by reconciliation."""

import json

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster_tests.ops.response.incidents.faulted_days import corrupted_aggregate
from atlasmart_dagster_tests.team_database import deployment  # noqa: F401 - both deployments

DAY = "2026-09-20"


@pytest.fixture
def env(tmp_path, deployment):  # noqa: F811 - the imported fixture
    return corrupted_aggregate(tmp_path, DAY)


def cli(env, capsys, *args):
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical", "--ephemeral-instance",
                 *args])
    return code, capsys.readouterr().out


def test_incident_lifecycle_through_the_cli(env, capsys):
    code, out = cli(env, capsys, "incident", "detect", "--json")
    (incident_id,) = json.loads(out)
    assert incident_id == "INC-0001"
    code, out = cli(env, capsys, "incident", "detect", "--json")
    assert json.loads(out) == []  # idempotent: the same evidence is not routed twice

    code, out = cli(env, capsys, "incident", "list", "--json")
    (listed,) = json.loads(out)
    assert listed["status"] == "open" and listed["partitions"] == [DAY]
    assert listed["signals"][0]["observed"]["cost_usd"] == "140.00"

    code, _ = cli(env, capsys, "incident", "note", incident_id, "--text", "cost looks +10 on the 20th",
                  "--actor", "oncall@atlasmart.example")
    assert code == 0

    code, out = cli(env, capsys, "incident", "contain", incident_id, "--json", "--actor", "oncall@atlasmart.example")
    contained = json.loads(out)
    assert {w["asset"] for w in contained["withdrawn"]} == {"metric_gross_revenue", "mart_finance_daily_sales",
                                                            "mart_executive_revenue"}
    code, out = cli(env, capsys, "status", "--partition", DAY, "--json")
    assert json.loads(out)[0]["state"] == "WITHDRAWN"

    code, out = cli(env, capsys, "incident", "triage", incident_id, "--json")
    triage = json.loads(out)["triage"]
    assert triage["verdict"] == "pipeline or schema bug"
    assert any("agg_matches_fact failed" in e for e in triage["evidence"]["pipeline or schema bug"])

    code, out = cli(env, capsys, "incident", "notify", incident_id, "--stage", "initial", "--json",
                    "--summary", "Finance figures for 2026-09-20 are being checked", "--restated",
                    "--out", str(env.root / "notices"))
    notice = json.loads(out)
    assert notice["impact"] == "unavailable" and notice["figures_will_be_restated"] is True
    assert (env.root / "notices").is_dir()

    with pytest.raises(SystemExit, match="verification has not passed"):
        main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical", "--ephemeral-instance",
              "incident", "resolve", incident_id])
    capsys.readouterr()

    code, out = cli(env, capsys, "incident", "repair", incident_id, "--from", DAY, "--to", DAY,
                    "--start-at", "agg_daily_sales", "--reason", "rebuild agg from facts", "--json")
    repair = json.loads(out)
    assert repair["success"] and repair["certified"] == []  # held until verification
    code, out = cli(env, capsys, "incident", "verify", incident_id, "--json")
    verification = json.loads(out)
    assert verification["passed"] and verification["per_day"][DAY]["canonical"] == "(3, 2, 4, 185, 130, 55)"
    code, out = cli(env, capsys, "status", "--partition", DAY, "--json")
    assert json.loads(out)[0]["state"] == "CERTIFIED"

    with pytest.raises(SystemExit, match="needs an owner, a due date"):
        main(["--home", str(env.home), "--clock", "logical", "incident", "postmortem", incident_id, "--gap", "x"])
    code, out = cli(env, capsys, "incident", "postmortem", incident_id, "--owner", "team:data-platform",
                    "--due", "2026-10-01", "--gap", "aggregate writes were not reconciled before publishing",
                    "--verification", "agg_matches_fact blocks the marts in CI", "--json")
    action = json.loads(out)["action_id"]
    with pytest.raises(SystemExit, match="needs the evidence"):
        main(["--home", str(env.home), "--clock", "logical", "incident", "postmortem", incident_id, "--complete", action])
    code, _ = cli(env, capsys, "incident", "postmortem", incident_id, "--complete", action, "--evidence", "CI run 42 green")
    assert code == 0
    code, out = cli(env, capsys, "incident", "resolve", incident_id, "--summary", "agg rebuilt and re-certified")
    assert code == 0

    code, out = cli(env, capsys, "incident", "show", incident_id, "--json")
    shown = json.loads(out)
    assert shown["status"] == "resolved" and len(shown["fingerprint"]) == 64
    assert [e["kind"] for e in shown["timeline"]][:2] == ["opened", "signal"]
    assert shown["postmortem_actions"][0]["done"] and shown["postmortem_actions"][0]["evidence"] == "CI run 42 green"
    assert {e["status"] for e in shown["timeline"] if e["status"]} >= {"open", "contained", "identified", "repairing",
                                                                        "verifying", "resolved"}
    code, out = cli(env, capsys, "incident", "list", "--json")
    assert json.loads(out) == []  # resolved incidents are kept, just not listed as open
    code, out = cli(env, capsys, "incident", "list", "--all", "--json")
    assert len(json.loads(out)) == 1


def test_consumer_report_opens_an_incident_without_storing_pii(env, capsys):
    from atlasmart_dagster.ops.runs.chains import run_reference

    run_reference(env.defs, env.instance)
    code, out = cli(env, capsys, "incident", "report", "--actor", "finance-analyst@atlasmart.example",
                    "--text", "Avery Synthetic (avery@example.invalid) says revenue for the 19th looks low",
                    "--partition", "2026-09-19", "--json")
    incident_id = json.loads(out)["incident"]
    code, out = cli(env, capsys, "incident", "show", incident_id, "--json")
    assert "Avery Synthetic" not in out and "avery@example.invalid" not in out
    assert "[redacted]" in out


def test_blast_radius_command(env, capsys):
    code, out = cli(env, capsys, "blast-radius", "--asset", "agg_daily_sales", "--from", DAY, "--to", DAY, "--json")
    radius = json.loads(out)
    assert radius["partitions"] == [DAY]
    assert set(radius["consumer_groups"]) == {"consumer_group_finance", "consumer_group_executives"}
    assert "team:finance" in radius["owners"] and radius["mermaid"].startswith("flowchart LR")
    code, out = cli(env, capsys, "blast-radius", "--field", "line_cost_usd", "--json")
    assets = {a["asset"]: a["columns"] for a in json.loads(out)["assets"]}
    assert assets["fact_sales"] == ["cost_usd", "gross_profit_usd"]
    assert assets["agg_daily_sales"] == ["cost_usd", "gross_profit_usd"] and "metric_gross_revenue" in assets
