"""An ``--incident`` must name an incident that exists: an unknown one is refused (exit 2) before anything is recorded."""

from __future__ import annotations

import sqlite3

import pytest

from atlasmart_dagster.store.ledger.incidents import IncidentStore
from atlasmart_dagster.store.clock import LogicalClock, parse_ts
from atlasmart_dagster_tests.cli.commands import run_in as run
from atlasmart_dagster_tests.environment import Env

DAY = "2026-09-20"
DECIDE = ("--partition", DAY, "--owner", "erp-operations", "--by", "ana", "--reason", "checked with the ERP")

COMMANDS_TAKING_AN_INCIDENT = {
    "anomaly approve": ("anomaly", "approve", *DECIDE),
    "anomaly reject": ("anomaly", "reject", *DECIDE),
    "restatement approve": ("restatement", "approve", *DECIDE),
    "batch retire": ("batch", "retire", "ERP-20260920-01", "--by", "ana", "--reason", "drifted"),
    "batch reinstate": ("batch", "reinstate", "ERP-20260920-01", "--by", "ana", "--reason", "fine after all"),
    "batch map": ("batch", "map", "ERP-20260920-01", "--rename", "qty=quantity", "--owner", "erp-operations",
                  "--by", "ana", "--reason", "renamed upstream"),
    "backfill": ("backfill", "--from", DAY, "--to", DAY, "--operator", "ana", "--reason", "repair"),
    "contract approve": ("contract", "approve", "--batch", "ERP-20260920-01", "--partition", DAY, "--version", "v2",
                         "--owner", "erp-operations", "--approved-by", "ana", "--reason", "compatible"),
}


@pytest.fixture
def env(tmp_path) -> Env:
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")
    return env



def ledger_dump(env: Env) -> list[str]:
    with sqlite3.connect(env.home / "ledger.db") as db:
        return list(db.iterdump())


@pytest.mark.parametrize("argv", COMMANDS_TAKING_AN_INCIDENT.values(), ids=COMMANDS_TAKING_AN_INCIDENT.keys())
def test_an_unknown_incident_is_refused_before_anything_is_recorded(env, capsys, argv):
    IncidentStore(env.ledger).open("a real one", "ana", parse_ts("2026-09-22T08:00:00Z"))  # INC-0001 exists
    before = ledger_dump(env)
    code, out, err = run(env, capsys, *argv, "--incident", "INC-9999")
    assert (code, out) == (2, "")
    assert err.strip().splitlines() == [("atlasmart: error: no such incident INC-9999, nothing was recorded "
                                         "(`atlasmart incident list --all` lists them)")]
    assert ledger_dump(env) == before


def test_a_real_incident_is_linked(env, capsys):
    incident = IncidentStore(env.ledger).open("a real one", "ana", parse_ts("2026-09-22T08:00:00Z"))
    code, _, err = run(env, capsys, *COMMANDS_TAKING_AN_INCIDENT["contract approve"], "--incident", incident.id)
    assert code == 0, err
    with sqlite3.connect(env.home / "ledger.db") as db:
        assert incident.id in "\n".join(db.iterdump())
