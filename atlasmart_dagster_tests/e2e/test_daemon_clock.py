"""Through the daemon: a game day on logical time, and a `dagster-daemon run` started with no clock on the same home.

The daemon's incident_sensor measures the day the game day misses on the
home's logical clock, not on the system clock (an availability of some
100,000 minutes, MISSED, before a home had one clock).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from atlasmart_dagster.store.clock import LogicalClock, parse_ts
from atlasmart_dagster.store.dagster_instance import packaged_instance_config
from atlasmart_dagster.store.home import CLOCK_ENV

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MISSED_DAY = "2026-09-22"  # never lands: the game day's incident

pytestmark = pytest.mark.slow


def test_the_daemon_measures_a_logical_game_day_on_logical_time(env, tmp_path):
    dagster_home = tmp_path / "dh"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text(packaged_instance_config().read_text())
    shell = {**{k: v for k, v in os.environ.items() if k != CLOCK_ENV}, "ATLASMART_HOME": str(env.home),
             "ATLASMART_LANDING": str(env.landing), "DAGSTER_HOME": str(dagster_home), "PYTHONUNBUFFERED": "1"}

    def game_day(*args):
        out = subprocess.run([BIN / "atlasmart", "--clock", "logical", "--json", *args], env=shell, cwd=REPO,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, (args, out.stdout[-2000:], out.stderr[-3000:])
        return json.loads(out.stdout)

    game_day("clock", "set", "2026-09-22T08:20:00Z")  # records the home's clock: logical
    assert game_day("tick")["scheduled"] == ["2026-09-21"]
    game_day("clock", "advance", "1560")  # 2026-09-23 10:20: 2026-09-22 missed its 08:30 deadline
    logical_now = LogicalClock(env.home / "clock.json").now()

    daemon = subprocess.Popen([BIN / "dagster-daemon", "run", "-w", str(REPO / "workspace.yaml")], env=shell,
                              cwd=REPO, stdout=open(tmp_path / "daemon.log", "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            missed = [r for r in env.ledger.slos.records(MISSED_DAY) if r["objective"] == "availability"]
            if missed:
                break
            assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
            time.sleep(3)
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
    log = (tmp_path / "daemon.log").read_text()[-3000:]
    assert missed, log  # incident_sensor (on by default) measured the missed day
    assert all(parse_ts(r["recorded_at"]) <= logical_now for r in env.ledger.slos.records()), log
    assert [(r["value"], r["met"]) for r in missed] == [(pytest.approx(1550, abs=60), False)]
