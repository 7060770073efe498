"""The generator's answers are right, and the quick benchmark (with its dagster-dbt peer) runs end to end."""

import json

import pytest

from atlasmart_dagster.bench.generator import expected_controls, generate, plan_day
from atlasmart_dagster.cli.main import main
from atlasmart_dagster.defs.resources import AtlasmartResource
from atlasmart_dagster.domain.controls import ControlTuple
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.published_controls import controls_of
from atlasmart_dagster.store.tables import FACT_SALES, QUARANTINE_ORDER_LINES, STG_ORDER_LINES


def test_expected_controls_match_a_brute_force_sum():
    plan = plan_day("2026-09-20", 12_345)
    lines = range(plan.clean)
    amount = [1000 + (37 * j) % 9000 for j in lines]
    cost = [a * 60 // 100 for a in amount]
    brute = ControlTuple(plan.clean, len({j // 3 for j in lines}), sum(1 + j % 4 for j in lines),
                         sum(amount) / 100, sum(cost) / 100, (sum(amount) - sum(cost)) / 100)
    assert expected_controls(plan) == brute


def test_the_pipeline_reproduces_the_generated_answers(tmp_path):
    import dagster as dg

    from atlasmart_dagster.definitions import build_definitions

    expected = generate(tmp_path / "gen", 2, 2_000)
    resource = AtlasmartResource(home=str(tmp_path / "home"), landing=str(tmp_path / "gen" / "landing"))
    days = sorted(expected["days"])
    outcome = run_chain(build_definitions(resource), dg.DagsterInstance.ephemeral(), resource.platform, days, lane="backfill")
    assert outcome.success and outcome.certified == days
    wh = resource.platform.warehouse
    for day in days:
        want = expected["days"][day]
        assert controls_of(wh, FACT_SALES, [day])[day] == ControlTuple.from_mapping(want["controls"])
        assert wh.partition_row_counts(STG_ORDER_LINES, [day])[day] == want["accepted"]
        assert wh.partition_row_counts(QUARANTINE_ORDER_LINES, [day])[day] == want["quarantined_total"]


def test_generate_command(tmp_path, capsys):
    assert main(["--json", "generate", "--days", "3", "--rows", "500", "--out", str(tmp_path / "g")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["days"] == 3 and summary["expected"]["rows"] == 500
    manifests = sorted((tmp_path / "g" / "landing").glob("*/_manifest.json"))
    assert len(manifests) == 3 and json.loads(manifests[0].read_text())["expected_rows"] == 500


@pytest.mark.slow
def test_quick_benchmark(tmp_path, capsys):
    code = main(["--home", str(tmp_path / "home"), "bench", "--quick", "--workdir", str(tmp_path / "b"),
                 "--out", str(tmp_path / "out")])
    assert code == 0
    report = json.loads((tmp_path / "out" / "results.json").read_text())
    assert report["all_correct"] and {r["name"] for r in report["results"]} >= {"day_100k", "range_7x100k"}
    from atlasmart_dagster.bench import peer

    with_peer = {r["name"]: r for r in report["results"] if r["peer"]}
    # the dagster-dbt peer in quick mode: on the user's own command
    assert list(with_peer) == ["cli_range_5x20k"]
    if peer.installed():
        assert with_peer["cli_range_5x20k"]["peer_correct"] and with_peer["cli_range_5x20k"]["peer_ratio"]
    else:
        assert with_peer["cli_range_5x20k"]["peer_status"] == peer.NOT_INSTALLED
    user_path = with_peer["cli_range_5x20k"]
    assert user_path["ours_correct"] and user_path["ours_certify_seconds"] > 0
    # ~28 per day plus ~50 per run (steps, run start/end): 38.6 over 5 days; 49 over 30 days before the cut
    assert 0 < user_path["events_per_partition"] < 45
    results_md = (tmp_path / "out" / "RESULTS.md").read_text()
    assert results_md.startswith("# AtlasMart benchmark (quick)") and "## Ours against the dagster-dbt peer" in results_md
    assert "## The user's own commands (headline)" in results_md
    assert results_md.index("(headline)") < results_md.index("## Every scenario against the pure-DuckDB reference")
    assert user_path["ours_peak_rss_mb"] > 50 and user_path["ours_loads"][0] is not None
    assert (tmp_path / "out" / "chart.png").stat().st_size > 1000


@pytest.mark.slow
def test_the_uis_path_is_measured_to_the_last_day_served(tmp_path):
    """The daemon user path: an asset backfill that dagster-daemon runs, timed to its end and to every day served."""
    from atlasmart_dagster.bench import user_paths
    from atlasmart_dagster.defs.assets.served import SERVED_ASSETS
    from atlasmart_dagster.store.tables import DAILY_CHAIN

    expected = generate(tmp_path / "gen", 2, 500, start="2026-09-17")
    days = sorted(expected["days"])
    env = user_paths.ours_environment(tmp_path / "gen" / "landing", tmp_path / "home", days[0], None)
    measured = user_paths.daemon_backfill(env, user_paths.OURS_MODULE, DAILY_CHAIN, days, served=SERVED_ASSETS,
                                          timeout=600)
    assert measured["success"], measured["failures"]
    # one run for the range (single-run backfill policy), certified by the sensor after the backfill ended
    assert measured["runs"] == 1 and measured["backfill_status"] == "COMPLETED_SUCCESS"
    assert 0 < measured["run_seconds"] < measured["seconds"] <= measured["certified_seconds"]
    controls = user_paths.served_controls(env)
    assert {d: ControlTuple.from_mapping(c) for d, c in controls.items()} == {
        d: ControlTuple.from_mapping(expected["days"][d]["controls"]) for d in days}


@pytest.mark.skipif(not __import__("os").path.exists("/usr/bin/time"), reason="needs /usr/bin/time (Debian's time)")
def test_a_measured_command_reports_its_own_peak_memory_not_the_benchmarks(tmp_path):
    """A forked child starts from its parent's high-water mark: the benchmark holding the generated data must not count."""
    import os

    from atlasmart_dagster.bench.user_paths import run_measured

    held = bytearray(400 * 1024 * 1024)  # the benchmark process, holding a generated year
    small = run_measured(["python3", "-c", "pass"], dict(os.environ))
    large = run_measured(["python3", "-c", "x = bytearray(200 * 1024 * 1024)"], dict(os.environ))
    assert small[0] == 0 and small[4] < 100, small[4]
    assert 200 < large[4] < 400, large[4]
    del held


def test_a_report_is_judged_again_by_todays_targets_and_shows_each_pair(tmp_path):
    """``render`` re-judges measured runs against the scenarios' targets now, and the headline shows every pair."""
    from atlasmart_dagster.bench.runner import FULL, machine, render

    year = next(sc for sc in FULL if sc.name == "cli_range_365x100k")
    measured = {
        "name": year.name, "mode": "cli", "team": False, "partitions": 365, "total_rows": 36_500_000, "repeats": 2,
        "reference_seconds": 50.0, "ours_seconds": 130.0, "ours_seconds_runs": [120.0, 140.0], "ratio": 2.6,
        "target": 99.0, "met": True, "rows_per_second": 1, "seconds_per_partition": 0.36, "ours_certify_seconds": 9.0,
        "ours_time_to_certified": 139.0, "reference_peak_rss_mb": 1, "ours_peak_rss_mb": 1400, "ours_correct": True,
        "reference_correct": True, "ours_loads": [1.0, 1.2], "peer_loads": [1.1, 1.3], "events_per_partition": 28,
        "peer_status": "ran", "peer_seconds": 150.0, "peer_seconds_runs": [200.0, 100.0], "peer_ratio": 0.87,
        "peer_target": 99.0, "peer_met": True, "peer_rows_per_second": 1, "peer_seconds_per_partition": 0.41,
        "peer_peak_rss_mb": 9000, "peer_checks_passed": None, "peer_correct": True,
    }
    (tmp_path / "results.json").write_text(json.dumps({"machine": machine(), "quick": False, "results": [measured]}))
    render(tmp_path)
    judged = json.loads((tmp_path / "results.json").read_text())["results"][0]
    assert (judged["target"], judged["peer_target"]) == (year.target, year.peer_target)
    assert judged["met"] is (2.6 <= year.target) and judged["peer_met"] is (0.87 <= year.peer_target)
    assert judged["ours_seconds_runs"] == [120.0, 140.0]  # the measurements are untouched
    headline = (tmp_path / "RESULTS.md").read_text().split("## Every scenario")[0]
    assert "| 0.87 (0.6, 1.4) |" in headline
