"""Customer names and emails are redacted in any case, from the source reference, before anything is stored."""

import json
import sqlite3

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.product.pii import REDACTED, redact
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster.store.tables import DIM_CUSTOMER
from atlasmart_dagster_tests.environment import Env

REPORT = ("CASEY SYNTHETIC (Casey@Example.Invalid) and the colleague of casey   synthetic, devon synthetic, "
          "say revenue for the 19th looks low")


def ledger_text(env) -> str:
    """Every value stored in the ledger, as text."""
    with sqlite3.connect(env.platform.home.ledger_db) as con:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(str(row) for t in tables for row in con.execute(f'SELECT * FROM "{t}"'))


@pytest.mark.parametrize("text", ["CASEY SYNTHETIC", "casey synthetic", "Casey  Synthetic", "AVERY@EXAMPLE.INVALID"])
def test_redact_matches_any_case_and_spacing(text):
    assert redact(f"from {text}.", ("Casey Synthetic", "avery@example.invalid")) == f"from {REDACTED}."


def test_a_report_is_redacted_from_the_reference_before_the_dimension_was_ever_loaded(tmp_path, capsys):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")
    assert env.warehouse.existing(DIM_CUSTOMER) is None  # nothing scheduled the reference job
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical", "--ephemeral-instance",
                 "incident", "report", "--actor", "cfo@atlasmart.example", "--partition", "2026-09-19",
                 "--text", REPORT, "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["incident"]
    stored = ledger_text(env)
    assert "say revenue for the 19th looks low" in stored  # the report itself was stored
    assert "casey" not in stored.lower() and "devon" not in stored.lower()
    assert stored.count(REDACTED) >= 4
