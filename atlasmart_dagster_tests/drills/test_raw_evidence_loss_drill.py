"""`atlasmart drill raw-evidence-loss`: every step passes on the product, and a step fails when what it checks is not so."""

import json
import shutil

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.drills import raw_evidence_loss

STEPS = ["baseline", "backup", "delete_raw", "verify_fails", "incident_opened", "backfill_refuses", "restore",
         "verify_passes", "recertified_identical"]


def drill(tmp_path, capsys):
    code = main(["--home", str(tmp_path / "home"), "--ephemeral-instance", "drill", "raw-evidence-loss",
                 "--workdir", str(tmp_path / "d")])
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "d" / "artifacts" / "acceptance_summary.json").read_text())
    return code, out, summary


def test_the_raw_evidence_loss_drill_passes_every_step(tmp_path, capsys):
    code, out, s = drill(tmp_path, capsys)
    assert code == 0 and s["passed"], s["steps"]
    assert [step["name"] for step in s["steps"]] == STEPS and all(s["acceptance"].values())
    assert s["batch_id"] == "ERP-20260920-01"
    steps = {step["name"]: step for step in s["steps"]}
    assert steps["verify_fails"]["evidence"]["problems"] == ["raw batch ERP-20260920-01 is missing from the raw store"]
    assert "Raw evidence lost: batch ERP-20260920-01" in steps["incident_opened"]["message"]
    refused = steps["backfill_refuses"]["evidence"]
    assert not refused["success"] and not refused["raw_folder_recreated"]
    assert "atlasmart restore" in refused["naming_batch_and_restore"][0]
    after = steps["recertified_identical"]["evidence"]
    assert after["files_identical"] and after["served_identical"]
    assert {v["version"] for v in after["after"]["served"].values()} == {1}
    assert out.count(" PASS  ") == len(STEPS) and " FAIL  " not in out and "PASSED" in out
    assert (tmp_path / "d" / "artifacts" / "raw_evidence_loss_report.md").stat().st_size > 500


def test_a_backfill_that_does_not_refuse_fails_its_step(tmp_path, capsys, monkeypatch):
    """Doctored: the raw copy is put back behind the drill's back just before the backfill runs."""
    real = raw_evidence_loss.run_backfill
    calls = []

    def backfill_with_the_raw_copy_put_back(defs, instance, platform, request, **kwargs):
        if not calls:  # the first backfill is the one that must refuse
            folder = platform.home.raw_dir / f"sales_date={request.start}"
            (backup,) = (tmp_path / "d" / "world" / "backups").iterdir()
            shutil.copytree(backup / "files" / "raw" / folder.name, folder, dirs_exist_ok=True)
        calls.append(request.start)
        return real(defs, instance, platform, request, **kwargs)

    monkeypatch.setattr(raw_evidence_loss, "run_backfill", backfill_with_the_raw_copy_put_back)
    code, out, s = drill(tmp_path, capsys)
    assert code == 1 and not s["passed"] and "FAILED" in out
    assert [name for name, ok in s["acceptance"].items() if not ok] == ["backfill_refuses"], s["acceptance"]
    step = next(step for step in s["steps"] if step["name"] == "backfill_refuses")
    assert step["result"] == "FAIL" and step["evidence"]["batch_absent_before"]
    assert step["evidence"]["success"] and step["evidence"]["raw_folder_recreated"]
    assert "FAIL  backfill succeeded" in out
