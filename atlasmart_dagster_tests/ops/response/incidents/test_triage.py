"""Triage weighs every SLO objective and each day's due state: a slow run, a day not due yet."""

import json

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.run_certification import certify_run
from atlasmart_dagster.store.clock import RUN_FINISHED, RUN_STARTED, LogicalClock
from atlasmart_dagster_tests.environment import Env

from .consumer_language import problems

DAY = "2026-09-21"


def cli(env, capsys, *args):
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical", "--ephemeral-instance",
                 *args])
    return code, capsys.readouterr().out


def test_a_slow_run_on_time_data_is_warehouse_performance(tmp_path, capsys):
    env = Env(tmp_path, clock="logical")
    clock = LogicalClock(env.home / "clock.json")
    # the batch is ready at 08:04; the run takes 15 minutes; the day is certified at 08:21, within its deadline
    clock.set("2026-09-22T08:05:00Z", {RUN_STARTED: "2026-09-22T08:05:00Z", RUN_FINISHED: "2026-09-22T08:20:00Z"})
    outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="current", certify=False)
    assert outcome.success
    clock.set("2026-09-22T08:21:00Z")
    assert certify_run(env.platform, outcome.run_id, outcome.success)
    missed = [r["objective"] for r in env.ledger.slos.records(DAY) if not r["met"]]
    assert missed == ["duration"]

    code, out = cli(env, capsys, "incident", "detect", "--json")
    (incident_id,) = json.loads(out)
    code, out = cli(env, capsys, "incident", "triage", incident_id, "--json")
    triage = json.loads(out)["triage"]
    assert triage["verdict"] == "warehouse performance"
    assert any("the run took 15 min (target <= 10 min)" in e for e in triage["evidence"]["warehouse performance"])
    assert set(triage["slo"][DAY]) == {"freshness", "completeness", "duration", "availability"}
    assert triage["due"][DAY]["state"] == "certified"


def test_a_report_about_a_day_not_due_yet_says_when_it_is_due(tmp_path, capsys):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T06:00:00Z")
    code, out = cli(env, capsys, "incident", "report", "--actor", "cfo@atlasmart.example", "--partition", DAY,
                    "--text", "Where are the sales of the 21st?", "--json")
    incident_id = json.loads(out)["incident"]
    code, out = cli(env, capsys, "incident", "triage", incident_id, "--json")
    triage = json.loads(out)["triage"]
    assert triage["verdict"] == "not due yet" and triage["holding"] == ["not due yet"]
    assert triage["evidence"]["source failure"] == []
    assert "2026-09-21 is due 2026-09-22T08:30:00Z" in triage["note"]
    assert triage["due"][DAY]["state"] == "not due yet" and triage["due"][DAY]["minutes"] == 150

    code, out = cli(env, capsys, "incident", "notify", incident_id, "--stage", "initial", "--json",
                    "--summary", "The sales of 2026-09-21 are on their way.", "--out", str(env.root / "n"))
    notice = json.loads(out)
    assert notice["impact"] == "not due yet"
    assert notice["day_status"][DAY] == "not due yet: it is due by 08:30 UTC on 2026-09-22"
    assert not problems(env, next((env.root / "n").glob("*.md")).read_text(), notice)
