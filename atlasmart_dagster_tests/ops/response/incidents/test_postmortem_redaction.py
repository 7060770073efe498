"""Every free text of the incident workflow is redacted before it is stored: postmortem actions, reasons, summaries."""

import json

import pytest

from atlasmart_dagster.product.pii import REDACTED
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import Env

from .test_pii import ledger_text
from .test_restatement_incident import DAY, ONCALL, cli, held  # noqa: F401 - the fixture

GAP = "Blake Synthetic's complaint (blake@example.invalid) was not routed"
VERIFICATION = "send casey@example.invalid a test report"
CUSTOMERS = ("blake", "casey", "avery", "devon", "emery")


def assert_no_customer(text: str) -> None:
    found = [name for name in CUSTOMERS if name in text.lower()]
    assert not found, f"customer PII stored: {found}"


@pytest.fixture
def reported(tmp_path, capsys):
    """An incident filed from a consumer report (no run needed)."""
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")
    code, out = cli(env, capsys, "incident", "report", "--actor", "cfo@atlasmart.example", "--partition", "2026-09-19",
                    "--text", "revenue for the 19th looks low", "--json")
    env.incident = json.loads(out)["incident"]
    return env


def test_a_postmortem_action_and_its_evidence_are_stored_redacted(reported, capsys):
    code, out = cli(reported, capsys, "incident", "postmortem", reported.incident, "--owner", "team:data-platform",
                    "--due", "2026-10-01", "--gap", GAP, "--verification", VERIFICATION, "--json")
    assert code == 0
    action = json.loads(out)["action_id"]
    assert cli(reported, capsys, "incident", "postmortem", reported.incident, "--complete", action,
               "--evidence", "AVERY SYNTHETIC (Avery@Example.Invalid) got the test report")[0] == 0

    shown = json.loads(cli(reported, capsys, "incident", "show", reported.incident, "--json")[1])
    (stored,) = shown["postmortem_actions"]
    assert stored["gap"] == f"{REDACTED}'s complaint ({REDACTED}) was not routed"
    assert stored["verification"] == f"send {REDACTED} a test report"
    assert stored["evidence"] == f"{REDACTED} ({REDACTED}) got the test report"
    assert f"for team:data-platform: {REDACTED}'s complaint" in shown["timeline"][-2]["message"]
    assert_no_customer(json.dumps(shown))
    assert_no_customer(ledger_text(reported))


def test_a_repair_reason_and_a_resolution_summary_are_stored_redacted(held, capsys):  # noqa: F811
    cli(held, capsys, "incident", "contain", held.incident, "--actor", ONCALL)
    assert cli(held, capsys, "batch", "retire", "ERP-20260919-02", "--by", "finance-owner", "--reason", "doubled")[0] == 0
    code, out = cli(held, capsys, "incident", "repair", held.incident, "--from", DAY, "--to", DAY, "--actor", ONCALL,
                    "--reason", "Blake Synthetic's order was doubled by the re-send", "--json")
    assert code == 0, out
    assert cli(held, capsys, "incident", "verify", held.incident, "--actor", ONCALL)[0] == 0
    assert cli(held, capsys, "incident", "resolve", held.incident, "--actor", ONCALL,
               "--summary", "told casey@example.invalid the figures stand")[0] == 0
    stored = ledger_text(held)
    assert "order was doubled by the re-send" in stored and "the figures stand" in stored
    assert_no_customer(stored)
