"""A contract approval names a batch of its day: one the day admitted or has in its landing folder."""

from __future__ import annotations

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.product.contract_approvals import approvals
from atlasmart_dagster_tests.environment import Env

DAY = "2026-09-20"


def approve(env: Env, capsys, batch: str) -> tuple[int, str]:
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", "contract", "approve",
                 "--batch", batch, "--partition", DAY, "--version", "v2", "--owner", "erp-operations",
                 "--approved-by", "dana", "--reason", "renamed column"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_an_approval_for_a_batch_the_day_never_had_is_refused_and_nothing_is_recorded(tmp_path, capsys):
    env = Env(tmp_path)
    code, out = approve(env, capsys, "ERP-20260920-77")
    assert code == 2, out
    assert "has no batch ERP-20260920-77, nothing was recorded" in out and "ERP-20260920-01" in out
    assert approvals(env.ledger) == []


def test_an_approval_for_the_batch_in_the_days_landing_folder_is_recorded(tmp_path, capsys):
    env = Env(tmp_path)
    code, out = approve(env, capsys, "ERP-20260920-01")
    assert code == 0, out
    assert [a["batch_id"] for a in approvals(env.ledger)] == ["ERP-20260920-01"]
