"""`atlasmart incident ...` exits as the README promises: 0 done, 1 refused or failed, 2 wrong arguments (nothing done)."""

import json

import pytest

from atlasmart_dagster.drills.faults import drift_rename_field
from atlasmart_dagster.store.ledger.incidents import INCIDENTS
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.cli.commands import run_in as run
from atlasmart_dagster_tests.environment import Env

DAY = "2026-09-21"
ONCALL = "oncall@atlasmart.example"



@pytest.fixture
def drifted(tmp_path, capsys):
    """The ERP renamed line_amount_usd: the contract gate stops every load of the day until an owner decides."""
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T08:20:00Z")
    drift_rename_field(env.day_dir(DAY), env.day_dir(DAY) / "_manifest.json", "line_amount_usd",
                       "gross_line_amount_usd")
    assert not run_chain(env.defs, env.instance, env.platform, [DAY], lane="current").success
    code, out, _ = run(env, capsys, "incident", "detect", "--json")
    (env.incident,) = json.loads(out)
    assert run(env, capsys, "incident", "contain", env.incident, "--actor", ONCALL)[0] == 0
    return env


REPAIR = ("--from", DAY, "--to", DAY, "--include-current", "--reason", "replay the preserved batch", "--actor", ONCALL)


def test_a_repair_whose_run_failed_exits_1_as_backfill_does(drifted, capsys):
    code, out, _ = run(drifted, capsys, "incident", "repair", drifted.incident, *REPAIR)
    assert code == 1
    assert "FAILED" in out and "source_contract_conforms" in out
    code, out, _ = run(drifted, capsys, "incident", "repair", drifted.incident, *REPAIR, "--json")
    assert code == 1 and json.loads(out)["success"] is False
    code, _, _ = run(drifted, capsys, "backfill", "--from", DAY, "--to", DAY, "--include-current",
                     "--operator", ONCALL, "--reason", "the same rebuild outside the incident")
    assert code == 1


@pytest.fixture
def reported(tmp_path, capsys):
    """An incident from a consumer report: nothing was run."""
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")
    code, out, _ = run(env, capsys, "incident", "report", "--actor", "cfo@atlasmart.example",
                       "--partition", "2026-09-19", "--text", "revenue for the 19th looks low", "--json")
    env.incident = json.loads(out)["incident"]
    return env


@pytest.mark.parametrize("argv,says", [
    (("show",), "incident show needs an incident id"),
    (("show", "INC-0099"), "no incident INC-0099"),
    (("note", "{id}"), "a note needs its text (--text)"),
    (("note", "INC-0099", "--text", "x"), "no incident INC-0099"),
    (("report", "--partition", "2026-09-19"), "incident report needs the consumer's words (--text)"),
    (("report", "--text", "x", "--asset", "casey@example.invalid"), "is not an asset of the code location"),
    (("notify", "{id}", "--stage", "final", "--summary", "x"), "argument --stage: invalid choice: 'final'"),
    (("notify", "{id}", "--stage", "update"), "a notice needs its summary (--summary)"),
    (("triage", "{id}", "--origin-field", "line_amount"), "unknown source field 'line_amount'"),
    (("triage", "{id}", "--origin-asset", "fact_sale"), "no asset 'fact_sale' in the code location"),
    (("repair", "{id}", "--reason", "rebuild"), "a repair needs its days (--from"),
    (("repair", "{id}", "--from", "2026-09-20", "--to", "2026-09-19", "--reason", "rebuild"),
     "repair refused: --from 2026-09-20 is after --to 2026-09-19"),
    (("repair", "{id}", "--from", "2026-09-19"), "--reason is required"),
])
def test_wrong_arguments_exit_2_and_record_nothing(reported, capsys, argv, says):
    before = json.loads(run(reported, capsys, "incident", "show", reported.incident, "--json")[1])["timeline"]
    incidents = len(reported.ledger.engine.select(INCIDENTS))
    code, out, err = run(reported, capsys, "incident", *(a.format(id=reported.incident) for a in argv))
    assert (code, out) == (2, ""), err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert json.loads(run(reported, capsys, "incident", "show", reported.incident, "--json")[1])["timeline"] == before
    assert len(reported.ledger.engine.select(INCIDENTS)) == incidents
