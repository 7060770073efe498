"""The cost-per-day chart: embedded range scenarios only, seconds per day for each side, later results win."""

import json
import subprocess
import sys

from atlasmart_dagster.bench.cost_per_day import cost_per_day_chart, merged_results, range_points


def _result(name, days, ours, peer, reference, mode="cli", team=False, peer_status="ran"):
    return {"name": name, "partitions": days, "mode": mode, "team": team, "ours_seconds": ours,
            "peer_seconds": peer, "reference_seconds": reference, "peer_status": peer_status}


RESULTS = [
    _result("cli_materialize_100k", 1, 5.0, 18.0, 0.3),
    _result("cli_range_365x100k", 365, 136.0, 146.0, 53.0),
    _result("cli_range_30x100k", 30, 15.0, 27.0, 3.9),
    _result("team_cli_range_30x100k", 30, 23.0, 35.0, 5.0, team=True),
    _result("daemon_range_30x100k", 30, 50.0, 80.0, 4.0, mode="daemon"),
    _result("range_30x100k", 30, 9.0, 12.0, 3.9, mode="range"),
    _result("cli_range_1095x100k", 1095, 420.0, None, 160.0, peer_status="failed: out of memory"),
]


def test_points_are_the_embedded_command_by_range_length_in_seconds_per_day():
    points = range_points(RESULTS)
    assert [p["days"] for p in points] == [1, 30, 365, 1095]
    assert [p["name"] for p in points] == ["cli_materialize_100k", "cli_range_30x100k", "cli_range_365x100k",
                                           "cli_range_1095x100k"]
    thirty = points[1]
    assert (thirty["ours"], thirty["peer"], thirty["reference"]) == (0.5, 0.9, 3.9 / 30)
    assert points[3]["peer"] is None and points[3]["peer_status"] == "failed: out of memory"


def test_a_later_results_file_replaces_the_same_scenario(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"results": RESULTS[:3]}))
    second.write_text(json.dumps({"results": [_result("cli_range_30x100k", 30, 12.0, 24.0, 3.6)]}))
    merged = {r["name"]: r for r in merged_results([first, second])}
    assert set(merged) == {"cli_materialize_100k", "cli_range_365x100k", "cli_range_30x100k"}
    assert merged["cli_range_30x100k"]["ours_seconds"] == 12.0


def test_the_chart_is_drawn_from_two_lengths_and_not_from_one(tmp_path):
    png = tmp_path / "cost.png"
    assert cost_per_day_chart(RESULTS, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not cost_per_day_chart(RESULTS[:1] + RESULTS[3:6], tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()


def test_the_module_draws_it_from_results_files(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"results": RESULTS}))
    out = tmp_path / "out.png"
    done = subprocess.run([sys.executable, "-m", "atlasmart_dagster.bench.cost_per_day", str(out), str(results)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.exists()
    usage = subprocess.run([sys.executable, "-m", "atlasmart_dagster.bench.cost_per_day"], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage" in usage.stderr
