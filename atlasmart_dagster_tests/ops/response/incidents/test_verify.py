"""`atlasmart incident verify` keeps certification held until a successful repair proved the day from raw."""

import json

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.team_database import deployment  # noqa: F401 - both deployments
from atlasmart_dagster_tests.ops.response.incidents.faulted_days import stop_day_by_contract_drift

from .consumer_language import problems

DAY = "2026-09-21"
ONCALL = "oncall@atlasmart.example"


def cli(env, capsys, *args):
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical", "--ephemeral-instance",
                 *args])
    return code, capsys.readouterr().out


@pytest.fixture
def drifted(tmp_path, capsys, deployment):  # noqa: F811 - the imported fixture
    """The ERP renamed line_amount_usd: the contract gate stopped the day; an incident is open and contained."""
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T08:20:00Z")
    env.batch_id = stop_day_by_contract_drift(env, DAY)
    code, out = cli(env, capsys, "incident", "detect", "--json")
    (env.incident,) = json.loads(out)
    code, out = cli(env, capsys, "incident", "contain", env.incident, "--actor", ONCALL, "--json")
    assert json.loads(out)["hold_id"] is not None
    return env


def held(env) -> bool:
    return any(h["incident_id"] == env.incident for h in env.ledger.holds.active())


def repair(env, capsys) -> dict:
    code, out = cli(env, capsys, "incident", "repair", env.incident, "--from", DAY, "--to", DAY, "--include-current",
                    "--reason", "replay the preserved batch", "--actor", ONCALL, "--json")
    return json.loads(out)


def verify(env, capsys) -> tuple[int, dict]:
    code, out = cli(env, capsys, "incident", "verify", env.incident, "--actor", ONCALL, "--json")
    return code, json.loads(out)


def test_verify_refuses_without_a_repair_run_and_after_a_failed_repair(drifted, capsys):
    code, data = verify(drifted, capsys)
    assert code == 1 and not data["passed"]
    assert "no repair run is recorded on the incident (`atlasmart incident repair`)" in data["missing"]
    # nothing was accepted, so every layer "reconciles" at zero: that is not a pass
    assert any("controls are all zero, but the manifest says 2 rows and raw holds 2" in m for m in data["missing"])
    assert held(drifted)

    outcome = repair(drifted, capsys)
    assert not outcome["success"]  # still the drifted layout: the contract gate stops it again
    code, data = verify(drifted, capsys)
    assert code == 1 and not data["passed"] and data["repair_run"] == outcome["run_id"]
    assert any(m.startswith(f"the latest repair run {outcome['run_id']} failed") for m in data["missing"])
    assert f"{DAY}: checks failed in repair run {outcome['run_id']}: raw_order_lines:source_contract_conforms" in data["missing"]
    assert held(drifted) and partition_status(drifted.platform, DAY).state != "CERTIFIED"
    code, out = cli(drifted, capsys, "incident", "verify", drifted.incident, "--actor", ONCALL)
    assert code == 1 and "verification FAILED, certification stays held; missing:" in out
    with pytest.raises(SystemExit, match="verification has not passed"):
        main(["--home", str(drifted.home), "--landing", str(drifted.landing), "--clock", "logical",
              "--ephemeral-instance", "incident", "resolve", drifted.incident])


@pytest.mark.on_s3  # reads what a team keeps in the bucket
def test_verify_passes_after_a_successful_repair_and_releases_the_hold(drifted, capsys):
    assert cli(drifted, capsys, "contract", "approve", "--batch", drifted.batch_id, "--partition", DAY, "--version", "v2",
               "--owner", "erp-operations", "--approved-by", "erp data owner", "--reason", "renamed field, same meaning",
               "--incident", drifted.incident)[0] == 0
    outcome = repair(drifted, capsys)
    assert outcome["success"]
    code, data = verify(drifted, capsys)
    assert code == 0 and data["passed"] and data["missing"] == []
    assert data["per_day"][DAY]["canonical"] == "(1, 1, 1, 60, 35, 25)"
    assert not held(drifted) and partition_status(drifted.platform, DAY).state == "CERTIFIED"


def test_schema_drift_notice_speaks_the_consumer_language(drifted, capsys):
    assert cli(drifted, capsys, "incident", "triage", drifted.incident, "--origin-field", "line_amount_usd")[0] == 0
    code, out = cli(drifted, capsys, "incident", "notify", drifted.incident, "--stage", "initial", "--json",
                    "--summary", "Sales of 2026-09-21 are not published yet.", "--out", str(drifted.root / "n"))
    notice = json.loads(out)
    markdown = next((drifted.root / "n").glob("*.md")).read_text()
    assert notice["impact"] == "unavailable"
    assert "the source system changed the layout of its sales data" in markdown
    assert not problems(drifted, markdown, notice)
