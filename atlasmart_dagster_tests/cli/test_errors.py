"""The command line's error promise: a user error is one line on stderr and an exit code, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.errors import StoreUnreadable
from atlasmart_dagster.store.platform import Platform
from atlasmart_dagster_tests.cli.commands import one_line, run


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return str(tmp_path / "home")


BACKFILL = ("backfill", "--operator", "ana", "--reason", "repair")


@pytest.mark.parametrize("argv,says", [
    (("status", "--partition", "notadate"), "argument --partition: 'notadate' is not a date in YYYY-MM-DD form"),
    (("controls", "--asset", "fact_sales", "--partition", "2026-99-99"), "'2026-99-99' is not a date"),
    ((*BACKFILL, "--from", "20260920", "--to", "2026-09-21"), "argument --from: '20260920' is not a date"),
    ((*BACKFILL, "--from", "2026-01-01", "--to", "2026-09-18"), "2026-01-01 is before the first partition 2026-09-17"),
    ((*BACKFILL, "--from", "2026-09-18", "--to", "2999-01-01"), "2999-01-01 is not a partition yet"),
    ((*BACKFILL, "--from", "2026-09-20", "--to", "2026-09-18"), "backfill refused: --from 2026-09-20 is after --to"),
    (("controls", "--asset", "dashboard"), "argument --asset: invalid choice: 'dashboard'"),
])
def test_a_bad_argument_is_one_line_and_exit_2_before_any_work(capsys, home, argv, says):
    code, out, err = run(capsys, "--home", home, "--ephemeral-instance", *argv)
    assert (code, out) == (2, "")
    assert says in one_line(err)
    assert not os.path.exists(os.path.join(home, "ledger.db"))  # nothing was recorded


def test_a_home_that_is_a_file_or_cannot_be_created_is_one_line_and_exit_2(capsys, tmp_path):
    a_file = tmp_path / "passwd"
    a_file.write_text("root:x:0:0\n")
    code, _, err = run(capsys, "--home", str(a_file), "status")
    assert code == 2 and f"the AtlasMart home {a_file} is not a folder" in one_line(err)
    code, _, err = run(capsys, "--home", str(a_file / "home"), "status")
    assert code == 2 and f"cannot create the AtlasMart home {a_file / 'home'}" in one_line(err)


def test_a_dagster_home_that_does_not_exist_yet_is_created_with_the_project_config(capsys, home, tmp_path, monkeypatch):
    dagster_home = tmp_path / "not" / "yet" / "dagster"
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    code, _, err = run(capsys, "--home", home, "certify", "--run", "no-such-run")
    assert code == 1 and f"run no-such-run is not in the Dagster instance {dagster_home}" in one_line(err)
    assert "atlasmart/lane" in (dagster_home / "dagster.yaml").read_text()  # lanes and run queue

    a_file = tmp_path / "dagster.txt"
    a_file.write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(a_file))
    code, _, err = run(capsys, "--home", home, "certify", "--run", "no-such-run")
    assert code == 2 and f"the Dagster home {a_file} ($DAGSTER_HOME) is not a folder" in one_line(err)


def test_logical_time_that_was_never_set_is_one_line_and_exit_2(capsys, home):
    code, out, err = run(capsys, "--home", home, "--clock", "logical", "status")
    assert (code, out) == (2, "")
    assert "logical time is not set in this home" in one_line(err) and "clock.json" in err


def test_a_damaged_ledger_says_restore_and_debug_shows_the_traceback(capsys, home):
    ledger = Platform.open(home).ledger
    ledger.partitions.events()  # creates the ledger file
    ledger.close()  # the last connection folds the write-ahead log into the file
    ledger = os.path.join(home, "ledger.db")
    with open(ledger, "r+b") as f:
        f.write(os.urandom(100))
    code, _, err = run(capsys, "--home", home, "status")
    line = one_line(err)
    assert code == 1
    assert f"the ledger at {ledger} is not a readable SQLite database" in line and "atlasmart restore" in line
    with pytest.raises(StoreUnreadable):
        main(["--home", home, "status", "--debug"])


def test_an_unexpected_error_is_one_line_that_points_at_debug(capsys, home, tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("")
    code, _, err = run(capsys, "--home", home, "metrics", "write", "--out", str(a_file / "m" / "atlasmart.prom"))
    line = one_line(err)
    assert code == 1 and line.startswith("atlasmart: error: unexpected") and "run again with --debug" in line
    with pytest.raises(OSError):
        main(["--home", home, "--debug", "metrics", "write", "--out", str(a_file / "m" / "atlasmart.prom")])


def test_ctrl_c_exits_130_without_a_traceback(tmp_path):
    out = tmp_path / "gen"
    atlasmart = os.path.join(os.path.dirname(sys.executable), "atlasmart")
    # SIGINT as at an interactive prompt: a runner started in the background
    # ignores it, and its children would inherit that (an ignored Ctrl-C is
    # rightly left alone by atlasmart, so this test would hang).
    proc = subprocess.Popen([atlasmart, "--home", str(tmp_path / "home"), "generate", "--days", "100000",
                             "--rows", "1000", "--out", str(out)], stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not (out / "landing").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # interrupt only once the command is at work, not while Python imports
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert one_line(err) == "atlasmart: interrupted"


def test_demo_skips_landing_folders_outside_the_partitions_and_loads_the_rest(env, capsys, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    for day in ("2026-09-18", "2026-09-19", "2026-09-20", "2026-09-21"):
        shutil.rmtree(env.day_dir(day))
    today = datetime.now(UTC).date()
    outside = {"2026-09-01": "before the first partition 2026-09-17",
               today.isoformat(): "is not a partition yet",
               (today + timedelta(days=30)).isoformat(): "is not a partition yet"}
    for day in outside:
        shutil.copytree(env.day_dir("2026-09-17"), env.day_dir(day))
    argv = ("--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", "demo")

    code, out, err = run(capsys, *argv, "--json")
    report = json.loads(out)
    assert code == 0, err
    assert [(p["partition"], p["state"]) for p in report["partitions"]] == [("2026-09-17", "CERTIFIED")]
    assert [s["partition"] for s in report["skipped"]] == sorted(outside)
    for skipped in report["skipped"]:
        assert outside[skipped["partition"]] in skipped["reason"]

    code, out, _ = run(capsys, *argv)
    assert code == 0 and "skipped sales_date=2026-09-01: 2026-09-01 is before the first partition 2026-09-17" in out


def test_demo_with_nothing_loadable_says_where_it_looked(capsys, home, tmp_path):
    (tmp_path / "landing" / "sales_date=2026-09-01").mkdir(parents=True)
    code, out, err = run(capsys, "--home", home, "--landing", str(tmp_path / "landing"), "demo")
    assert (code, out) == (2, "")
    line = one_line(err)
    assert f"no day to load in landing zone {tmp_path / 'landing'}" in line and "before the first partition" in line
