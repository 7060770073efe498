"""The atlasmart command line, in-process (fast) and as installed (slow)."""

import json
import os
import re
import subprocess
import sys

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster_tests.team_database import deployment  # noqa: F401 - both deployments


def run_cli(capsys, env, *args):
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", *args])
    out = capsys.readouterr().out
    return code, out


def test_demo_prints_certified_controls_per_partition_and_in_total(env, capsys):
    code, out = run_cli(capsys, env, "demo", "--json")
    assert code == 0
    report = json.loads(out)
    by_day = {p["partition"]: p for p in report["partitions"]}
    assert by_day["2026-09-18"]["staged"] == 5 and by_day["2026-09-18"]["quarantined"] == 1
    assert by_day["2026-09-20"]["controls"]["cost_usd"] == "130.00"
    assert {p["state"] for p in report["partitions"]} == {"CERTIFIED"}
    assert report["total"]["controls"] == {
        "paid_lines": 10, "orders": 8, "units": 12,
        "revenue_usd": "820.00", "cost_usd": "495.00", "gross_profit_usd": "325.00",
    }
    assert (report["total"]["staged"], report["total"]["accepted"], report["total"]["quarantined"]) == (13, 10, 3)
    assert report["total"]["committed_source_seq"] == 208

    code, text = run_cli(capsys, env, "status")
    assert code == 0 and text.count("CERTIFIED") == 5 and "v1" in text

    code, out = run_cli(capsys, env, "controls", "--asset", "agg_daily_sales", "--partition", "2026-09-20", "--json")
    assert json.loads(out)["partitions"][0]["published"]["cost_usd"] == "130.00"


def test_status_of_a_never_loaded_partition_is_absent_not_zero(env, capsys):
    (env.day_dir("2026-09-21") / "_manifest.json").unlink()
    code, out = run_cli(capsys, env, "demo", "--json")
    assert code == 1
    day = next(p for p in json.loads(out)["partitions"] if p["partition"] == "2026-09-21")
    assert day["controls"] is None and day["state"] == "DELAYED"
    assert "source not ready" in day["failures"][0]
    code, out = run_cli(capsys, env, "status", "--partition", "2026-09-21", "--json")
    (status,) = json.loads(out)
    assert status["state"] == "DELAYED" and "blocked upstream" in status["detail"]
    assert all(a["served_version"] is None and a["controls"] is None for a in status["assets"])


def test_help_explains_every_command(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for command in ("demo", "status", "controls", "certify", "dagster-home"):
        assert command in text


@pytest.mark.slow
def test_installed_cli_and_dagster_materialize_share_one_instance(env, tmp_path, deployment):
    if deployment == "team":
        # In team mode the CLI submits to the run queue, which needs a daemon:
        # that path is e2e/test_team_queue.py.
        pytest.skip("embedded instance only; the team path is e2e/test_team_queue.py")
    """As an operator would: `atlasmart demo`, then `dagster asset materialize` + `atlasmart certify`."""
    shell = {**os.environ, "ATLASMART_HOME": str(env.home), "ATLASMART_LANDING": str(env.landing),
             "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    os.makedirs(shell["DAGSTER_HOME"])
    from atlasmart_dagster.store.instance.dagster_instance import packaged_instance_config
    (tmp_path / "dagster_home" / "dagster.yaml").write_text(packaged_instance_config().read_text())
    bindir = os.path.dirname(sys.executable)
    demo = subprocess.run([f"{bindir}/atlasmart", "demo", "--json"], env=shell, capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert json.loads(demo.stdout)["total"]["controls"]["revenue_usd"] == "820.00"
    text = subprocess.run([f"{bindir}/atlasmart", "demo"], env=shell, capture_output=True, text=True, timeout=300)
    assert "(10, 8, 12, 820, 495, 325)" in text.stdout and "committed source seq: 208" in text.stdout

    materialize = subprocess.run(
        [f"{bindir}/dagster", "asset", "materialize", "-m", "atlasmart_dagster",
         "--select", "raw_order_lines,stg_order_lines,quarantine_order_lines,fact_sales,agg_daily_sales,"
                     "metric_gross_revenue,mart_finance_daily_sales,mart_executive_revenue",
         "--partition", "2026-09-20"],
        env=shell, capture_output=True, text=True, timeout=300,
    )
    assert materialize.returncode == 0, materialize.stderr[-3000:]
    assert "Executing steps in process" in materialize.stderr
    run_id = re.search(r" - ([0-9a-f-]{36}) - .*RUN_SUCCESS", materialize.stderr).group(1)
    # the 8 characters the UI shows are enough
    certify = subprocess.run([f"{bindir}/atlasmart", "certify", "--run", run_id[:8], "--json"],
                             env=shell, capture_output=True, text=True, timeout=120)
    assert certify.returncode == 0, certify.stderr[-2000:]
    assert {d["partition"] for d in json.loads(certify.stdout)} == {"2026-09-20"}
    assert all(d["certified"] for d in json.loads(certify.stdout))
