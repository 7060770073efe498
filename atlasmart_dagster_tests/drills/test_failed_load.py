"""`atlasmart drill failed-load`: the figures of the issue, and the same evidence every time."""

import json
import re

import pytest

from atlasmart_dagster.cli.main import main

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def play(tmp_path, name, capsys, *extra):
    code = main(["--home", str(tmp_path / "home"), *extra, "drill", "failed-load", "--workdir", str(tmp_path / name)])
    return code, capsys.readouterr().out


def test_failed_load_drill_prints_the_signals_and_holds_the_figures(tmp_path, capsys):
    code, out = play(tmp_path, "one", capsys, "--ephemeral-instance")
    assert code == 0, out
    assert "PASSED" in out
    assert "freshness 12 min" in out and "availability 16 min" in out and "duration 7 min" in out
    assert "completeness 100 %" in out
    assert "freshness 6 min" in out and "availability 18 min" in out
    summary = json.loads((tmp_path / "one" / "artifacts" / "acceptance_summary.json").read_text())
    assert summary["passed"], summary["acceptance"]
    healthy = {k: v["value"] for k, v in summary["healthy"]["slo"].items()}
    assert healthy == {"freshness": 12, "completeness": 100, "duration": 7, "availability": 16}
    assert summary["healthy"]["slo_all_met"]
    late = summary["late_manifest"]["slo"]
    assert (late["freshness"]["value"], late["availability"]["value"]) == (6, 18)
    assert summary["healthy"]["timeline"]["scheduled"] == "08:00"
    repair = summary["historical_repair"]
    assert repair["corrupted_controls"] == "(3, 2, 4, 185, 140, 45)"
    assert repair["repaired_controls"] == "(3, 2, 4, 185, 130, 55)"
    assert (repair["observed"]["cost_usd"], repair["expected"]["cost_usd"]) == ("140.00", "130.00")
    assert repair["repair_scope"] == ["agg_daily_sales", "mart_executive_revenue", "mart_finance_daily_sales", "metric_gross_revenue"]
    assert summary["replay"]["fingerprints_identical"] and summary["replay"]["fact_parquet_bytes_identical"]
    for name in ("runbook.md", "operator_notes.md", "evidence/runs.json", "evidence/ledger.json", "evidence/signals.json"):
        assert (tmp_path / "one" / "artifacts" / name).stat().st_size > 200


@pytest.mark.slow
def test_running_the_drill_twice_gives_identical_evidence_apart_from_run_ids(tmp_path, capsys):
    assert play(tmp_path, "first", capsys)[0] == 0
    assert play(tmp_path, "second", capsys)[0] == 0
    for name in ("acceptance_summary.json", "evidence/runs.json", "evidence/ledger.json", "evidence/signals.json",
                 "operator_notes.md", "runbook.md"):
        first = UUID.sub("<run>", (tmp_path / "first" / "artifacts" / name).read_text())
        second = UUID.sub("<run>", (tmp_path / "second" / "artifacts" / name).read_text())
        assert first == second, name
