"""A re-send held by the restatement guard: incident, triage, notice and verify through the real CLI."""

import json

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

from .consumer_language import problems

DAY = "2026-09-19"
ONCALL = "oncall@atlasmart.example"


def cli(env, capsys, *args):
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical", "--ephemeral-instance",
                 *args])
    return code, capsys.readouterr().out


@pytest.fixture
def held(tmp_path, capsys):
    """09-19 certified (1, 1, 1, 100, 60, 40); three days later the ERP re-sends it with every amount doubled."""
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-20T08:20:00Z")
    assert run_chain(env.defs, env.instance, env.platform, [DAY], lane="current").certified == [DAY]
    LogicalClock(env.home / "clock.json").set("2026-09-23T07:00:00Z")
    rows = [{**r, "source_seq": r["source_seq"] + 100, "line_amount_usd": "200.00", "line_cost_usd": "120.00"}
            for r in read_rows(env.day_dir(DAY))]
    write_batch(env.day_dir(DAY), rows, batch_id="ERP-20260919-02", ready_at="2026-09-23T06:30:00Z")
    assert run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill").certified == []
    code, out = cli(env, capsys, "incident", "detect", "--json")
    (env.incident,) = json.loads(out)
    return env


def test_a_held_restatement_opens_an_incident_triaged_as_a_source_change_not_lateness(held, capsys):
    code, out = cli(held, capsys, "incident", "triage", held.incident, "--json")
    triage = json.loads(out)["triage"] if "triage" in json.loads(out) else json.loads(out)
    assert triage["verdict"] == "source failure"
    evidence = " ".join(triage["evidence"]["source failure"])
    assert "moves certified figures" in evidence and "revenue_usd 100.00 -> 200.00" in evidence
    assert "min after the schedule" not in evidence  # a re-send is not 'late' against the day's first schedule


def test_the_notice_tells_consumers_the_published_figures_stand(held, capsys):
    cli(held, capsys, "incident", "triage", held.incident)
    code, out = cli(held, capsys, "incident", "notify", held.incident, "--stage", "initial", "--json",
                    "--summary", "A correction of 19 September is being checked.", "--out", str(held.root / "n"))
    notice = json.loads(out)
    markdown = next((held.root / "n").glob("*.md")).read_text()
    assert "held back until the data owner confirms them" in markdown and "revenue 200" in markdown.lower()
    assert not problems(held, markdown, notice)


def test_verify_waits_for_the_owners_decision(held, capsys):
    code, out = cli(held, capsys, "incident", "contain", held.incident, "--no-hold", "--actor", ONCALL, "--json")
    code, out = cli(held, capsys, "incident", "repair", held.incident, "--from", DAY, "--to", DAY,
                    "--reason", "rebuild the day", "--actor", ONCALL, "--json")
    code, out = cli(held, capsys, "incident", "verify", held.incident, "--actor", ONCALL, "--json")
    data = json.loads(out)
    assert code == 1 and any("the data owner must approve the figures" in m for m in data["missing"])
    assert cli(held, capsys, "batch", "retire", "ERP-20260919-02", "--by", "finance-owner",
               "--reason", "doubled amounts: ERP bug")[0] == 0
    cli(held, capsys, "incident", "repair", held.incident, "--from", DAY, "--to", DAY,
        "--reason", "reload without the rejected batch", "--actor", ONCALL, "--json")
    code, out = cli(held, capsys, "incident", "verify", held.incident, "--actor", ONCALL, "--json")
    data = json.loads(out)
    assert code == 0 and data["passed"], data["missing"]
    assert data["per_day"][DAY]["canonical"] == "(1, 1, 1, 100, 60, 40)"
