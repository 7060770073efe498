"""After a restatement, what consumers were told before stays readable: status, controls --version, maintain."""

from __future__ import annotations

import json

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.ops.recovery.maintenance import expire_snapshots
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAY = "2026-09-18"


def cli(env: Env, capsys, *args) -> tuple[int, str]:
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", *args])
    return code, capsys.readouterr().out


@pytest.fixture
def restated(tmp_path) -> Env:
    """The sample certified; then 09-18 (v1: revenue 395.00) re-sent with O1000/1 refunded (v2: 320.00)."""
    env = Env(tmp_path)
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").certified == SAMPLE_DAYS
    rows = read_rows(env.day_dir(DAY))
    refund = {**rows[0], "source_seq": 209, "status": "refunded"}
    write_batch(env.day_dir(DAY), rows + [refund], batch_id="ERP-20260918-02", ready_at="2026-09-23T06:30:00Z")
    assert run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill").certified == [DAY]
    return env


def test_status_says_what_the_day_was_restated_from(restated, capsys):
    status = partition_status(restated.platform, DAY)
    assert status.state == "CERTIFIED" and status.certified_version == 2
    assert "restated from version 1: paid lines 4 -> 3" in status.detail
    assert "revenue 395.00 -> 320.00" in status.detail
    code, out = cli(restated, capsys, "status", "--partition", DAY, "--json")
    (day,) = json.loads(out)
    assert [v["version"] for v in day["previous_versions"]] == [1]
    assert day["previous_versions"][0]["controls"]["revenue_usd"] == "395.00"


def test_controls_reads_version_1_at_its_certified_snapshot(restated, capsys):
    code, out = cli(restated, capsys, "controls", "--asset", "mart_finance_daily_sales", "--partition", DAY,
                    "--version", "1", "--json")
    assert code == 0, out
    v1 = json.loads(out)
    assert v1["read_at_snapshot"]["revenue_usd"] == "395.00" == v1["certified"]["revenue_usd"]
    assert v1["served_now"] is False and v1["versions"] == [1, 2]
    code, out = cli(restated, capsys, "controls", "--asset", "mart_finance_daily_sales", "--partition", DAY,
                    "--version", "2", "--json")
    assert json.loads(out)["read_at_snapshot"]["revenue_usd"] == "320.00" and json.loads(out)["served_now"]
    code, _ = cli(restated, capsys, "controls", "--asset", "mart_finance_daily_sales", "--partition", DAY,
                  "--version", "3")
    assert code == 2


def test_maintenance_keeps_every_certified_version_readable(restated, capsys):
    expire_snapshots(restated.platform, keep_last=1)
    code, out = cli(restated, capsys, "controls", "--asset", "metric_gross_revenue", "--partition", DAY,
                    "--version", "1", "--json")
    assert code == 0 and json.loads(out)["read_at_snapshot"]["revenue_usd"] == "395.00", out
