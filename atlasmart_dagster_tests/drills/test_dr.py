"""The disaster-recovery drill: the figures of the issue, from one command."""

import json

from atlasmart_dagster.cli.main import main


def test_dr_drill_restores_the_sample_and_proves_it(tmp_path, capsys):
    code = main(["--home", str(tmp_path / "home"), "--ephemeral-instance", "drill", "dr", "--workdir", str(tmp_path / "dr")])
    out = capsys.readouterr().out
    s = json.loads((tmp_path / "dr" / "artifacts" / "acceptance_summary.json").read_text())
    assert code == 0 and s["passed"], s["acceptance"]
    assert s["controls"]["before"] == "(10, 8, 12, 820, 495, 325)"
    assert s["controls"]["damaged"] == "(7, 6, 8, 635, 365, 270)"
    assert s["controls"]["restored"] == s["controls"]["rolled_back"] == "(10, 8, 12, 820, 495, 325)"
    assert s["fact_sha256_after_restore"] == s["fact_sha256_before"]
    assert any("2026-09-20" in p for p in s["detected_problems"])
    assert "What this drill does not prove" in out
