"""Every free text typed on the command line is redacted before a command stores it, not only incident texts."""

import sqlite3

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.pii import REDACTED
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env

REASON = "Blake Synthetic's complaint (blake@example.invalid): AVERY  SYNTHETIC saw it too"


def stored_text(env: Env) -> str:
    """Every text value of every ledger table."""
    con = sqlite3.connect(env.home / "ledger.db")
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(str(v) for t in tables for row in con.execute(f'SELECT * FROM "{t}"') for v in row)
    finally:
        con.close()


def test_reasons_of_batch_backfill_and_owner_decisions_are_stored_redacted(tmp_path, capsys):
    env = Env(tmp_path)
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS[:1], lane="backfill").certified == SAMPLE_DAYS[:1]
    base = ["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance"]
    assert main(base + ["batch", "retire", "ERP-20260917-01", "--by", "finance-owner", "--reason", REASON]) == 0
    assert main(base + ["batch", "reinstate", "ERP-20260917-01", "--by", "finance-owner", "--reason", REASON]) == 0
    assert main(base + ["backfill", "--from", "2026-09-17", "--to", "2026-09-17", "--operator", "oncall",
                        "--reason", REASON]) == 0
    capsys.readouterr()
    text = stored_text(env).lower()
    assert "blake" not in text and "avery" not in text and "example.invalid" not in text
    assert REDACTED in stored_text(env)
