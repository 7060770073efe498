"""The cost of publishing the certified branch is measured, not assumed: both arms run, are checked, and are timed."""

import json

import pytest

from atlasmart_dagster.bench import publish_cost
from atlasmart_dagster.bench.publish_cost import WITH, WITHOUT, markdown, merge, summarize


def run(arm: str, pair: int, seconds: float, publish: float | None = None, correct: bool = True) -> dict:
    return {"arm": arm, "pair": pair, "materialize_seconds": seconds - 3, "certify_seconds": 3.0,
            "time_to_certified_seconds": seconds, "publish_seconds": publish, "correct": correct,
            "load_materialize": 1.0, "load_certify": 1.1}


@pytest.mark.parametrize("publish, met", [(1.0, True), (2.0, True), (2.2, False)])
def test_the_target_is_the_publish_steps_share_of_time_to_certified(publish, met):
    summary = summarize([run(WITH, 0, 42.0, publish), run(WITHOUT, 0, 40.0)])
    assert summary["publish_share"] == round(publish / 42.0, 4) and summary["met"] is met
    assert summary["difference_seconds"] == 2.0 and summary["difference_share"] == 0.05


def test_the_certification_processes_are_compared_pair_by_pair():
    runs = [run(WITH, 0, 42.0, 1.0), run(WITHOUT, 0, 40.0), run(WITHOUT, 1, 60.0), run(WITH, 1, 61.0, 1.0)]
    runs[0]["certify_seconds"], runs[3]["certify_seconds"] = 4.0, 3.5  # the without arms took 3.0 s
    assert summarize(runs)["certify_difference_seconds"] == 0.75


def test_a_with_run_that_did_not_time_its_publish_step_meets_nothing():
    summary = summarize([run(WITH, 0, 42.0, None), run(WITHOUT, 0, 40.0)])
    assert summary["publish_share"] is None and summary["met"] is None
    assert "not met" in markdown({**summary, "days": 30, "rows_per_day": 100_000, "runs": [run(WITH, 0, 42.0)]})


def test_one_wrong_arm_makes_the_whole_measurement_incorrect():
    assert not summarize([run(WITH, 0, 42.0, 1.0), run(WITHOUT, 0, 40.0, correct=False)])["all_correct"]
    assert not summarize([])["all_correct"]


def test_reports_merge_only_when_they_go_on_from_each_other():
    first = {"days": 365, "rows_per_day": 100_000, "shared_materialization": True,
             "runs": [run(WITH, 0, 800.0, 2.8), run(WITHOUT, 0, 798.0)]}
    second = {**first, "runs": [run(WITHOUT, 1, 700.0), run(WITH, 1, 703.0, 2.6)]}
    merged = merge([first, second])
    assert merged["pairs"] == 2 and merged["publish_seconds"] == 2.7
    with pytest.raises(SystemExit, match="first-pair"):
        merge([first, first])
    with pytest.raises(SystemExit, match="one kind"):
        merge([first, {**second, "days": 30}])


def test_the_without_arm_refuses_to_run_if_certification_no_longer_publishes_through_converge(tmp_path, monkeypatch):
    """Replacing a name certify_run no longer calls would time the branch in both arms: refused instead."""
    from atlasmart_dagster.product import run_certification

    monkeypatch.setattr(run_certification, "converge", lambda platform: None)
    with pytest.raises(SystemExit, match="converge"):
        publish_cost.certify("any-run", with_branch=False, record=tmp_path / "record.json")
    assert not (tmp_path / "record.json").exists()


@pytest.mark.slow
def test_both_arms_certify_every_day_and_only_the_with_arm_publishes_inside_the_run(tmp_path, capsys):
    assert publish_cost.main(["measure", "--days", "2", "--rows", "500", "--pairs", "1",
                              "--workdir", str(tmp_path), "--out", str(tmp_path / "report.json")]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    with_run, without_run = (next(r for r in report["runs"] if r["arm"] == arm) for arm in (WITH, WITHOUT))
    assert report["all_correct"] and with_run["certified"] == without_run["certified"] == 2
    # the with arm timed the real publish inside `atlasmart certify`; the without arm reached the same call and
    # published nothing there, and its branch converged afterwards, as the next tick would publish it
    assert with_run["publish_calls"] == 1 and 0 < with_run["publish_seconds"] < with_run["certify_seconds"]
    assert without_run["publish_calls"] == 1 and without_run["publish_seconds"] is None  # reached, left out
    assert without_run["publish_later_seconds"] > 0 and without_run["branch_ok"]
    assert 0 < report["publish_share"] < 1 and report["time_to_certified_without"] > 0
    for r in report["runs"]:
        assert r["load_materialize"] is not None and r["load_certify"] is not None
        assert r["time_to_certified_seconds"] == pytest.approx(r["materialize_seconds"] + r["certify_seconds"])
