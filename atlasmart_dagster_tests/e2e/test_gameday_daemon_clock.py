"""A game day on logical time while real ``dagster-daemon run`` processes serve the same home (issue 33).

The home is pinned to the logical clock (``atlasmart --clock logical clock set``)
and two daemons are started on it, each with its own code server loaded from
the repository's ``workspace.yaml``:

* one as the operator starts it, ``DAGSTER_HOME=$(atlasmart dagster-home)``
  and no ``ATLASMART_CLOCK``: it follows the home's clock;
* one started with ``ATLASMART_CLOCK=system`` (on its own Dagster instance, so
  its ticks are its own): it asks for the other clock and is refused.

Then the game day, through the installed ``atlasmart`` CLI on the logical
clock: 2026-09-22 08:20, a tick delivers 2026-09-21 (and loads the sample's
history); 2026-09-23 08:05, a tick runs the schedule for 2026-09-22, whose
source never lands (blocked); 2026-09-23 09:00, half an hour past its 08:30
deadline, nobody ticks: only the daemons' ``incident_sensor`` can measure the
missed day. The test waits for each daemon's next tick of both measuring
sensors after that last move, polling once a second: about 85 s in all on 2
cores, most of it incident_sensor's interval (60 s, the product's; the daemon
ticks it some 65 s apart) after its first tick, 10-15 s after the daemon starts.

Asserted: every SLO measurement in the ledger was taken within the game day's
logical window, none at the real date; the missed day's availability is 60
minutes (08:00 to 09:00 logical), recorded by the daemon's tick that says it
opened the incident; the refused daemon's sensors skipped every tick with the
one-line refusal, requested nothing and launched no run.

Before a home had one clock, a daemon started with no clock ran on the system
clock and measured a game day at the real date ('availability 100581.17 min,
MISSED'). Run on that code (the commit before ``home_clock``), this test fails
on its first assertion: 2026-09-22 availability 106423.09 min, recorded at the
real date; the daemon started with ``ATLASMART_CLOCK=system`` was not refused
either. An earlier version of
this test never ticked the schedule for 2026-09-22, so the day was never
attempted on time, nothing was owed, and it waited out its deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.scheduler.instigation import TickStatus

from atlasmart_dagster.store.clock import parse_ts
from atlasmart_dagster.store.home import CLOCK_ENV
from atlasmart_dagster.store.instance.dagster_instance import packaged_instance_config
from atlasmart_dagster_tests.environment import Env

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GAME_DAY_START = "2026-09-22T08:20:00Z"
MISSED_DAY = "2026-09-22"  # its source never lands: the game day's incident
MISSED_AT = "2026-09-23T09:00:00Z"  # 60 min after its 08:00 schedule, 30 min past its 08:30 deadline
REFUSAL = "this home runs on the logical clock"
MEASURING_SENSORS = ("certification_sensor", "incident_sensor")  # on by default; they write the ledger's SLOs

pytestmark = pytest.mark.slow


class Daemon:
    """A ``dagster-daemon run`` of the repository's workspace in its own process group, and its instance."""

    def __init__(self, shell: dict, log: Path):
        self.log = log
        self.instance = dg.DagsterInstance.from_config(shell["DAGSTER_HOME"])
        self.process = subprocess.Popen([BIN / "dagster-daemon", "run", "-w", str(REPO / "workspace.yaml")],
                                        env=shell, cwd=REPO, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                        start_new_session=True)

    def ticks(self, sensor: str) -> list:
        """The sensor's ended ticks, oldest first."""
        states = [s for s in self.instance.all_instigator_state() if s.instigator_name == sensor]
        ticks = [t for s in states for t in self.instance.get_ticks(s.instigator_origin_id, s.selector_id)]
        return sorted((t for t in ticks if t.status != TickStatus.STARTED), key=lambda t: t.timestamp)

    def alive(self) -> None:
        assert self.process.poll() is None, self.log.read_text()[-3000:]

    def stop(self) -> None:
        """Ask the daemon and its code server to end, as systemd stops it (``ended`` waits for them)."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def ended(self) -> None:
        """Wait for the stopped daemon; killed with whatever is left of its group if it lingers."""
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)
        self.instance.dispose()

def test_a_daemon_on_the_home_measures_a_logical_game_day_on_logical_time_one_asking_for_system_is_refused(
        env: Env, tmp_path):
    shell = {**{k: v for k, v in os.environ.items() if k != CLOCK_ENV}, "ATLASMART_HOME": str(env.home),
             "ATLASMART_LANDING": str(env.landing), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
             "PYTHONUNBUFFERED": "1"}

    def atlasmart(*args, code=0):
        out = subprocess.run([BIN / "atlasmart", *args], env=shell, cwd=REPO, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == code, (args, out.stdout[-2000:], out.stderr[-3000:])
        return out.stdout

    def game_day(*args, code=0) -> dict:
        return json.loads(atlasmart("--clock", "logical", "--json", *args, code=code))

    assert game_day("clock", "set", GAME_DAY_START)["home_clock"] == "logical"  # the home is pinned to logical
    shell["DAGSTER_HOME"] = atlasmart("dagster-home").strip()
    refused_home = tmp_path / "dagster-system"
    refused_home.mkdir()
    (refused_home / "dagster.yaml").write_text(packaged_instance_config().read_text())
    daemon = Daemon(shell, tmp_path / "daemon.log")
    refused = Daemon({**shell, "DAGSTER_HOME": str(refused_home), CLOCK_ENV: "system"}, tmp_path / "refused.log")
    try:
        first = game_day("tick")
        assert first["scheduled"] == ["2026-09-21"], first
        assert all(r["success"] for r in first["runs"]) and "2026-09-21" in sum((r["certified"] for r in first["runs"]),
                                                                                 []), first
        game_day("clock", "advance", str(23 * 60 + 45))  # 2026-09-23 08:05
        second = game_day("tick", code=1)  # the schedule runs 2026-09-22: no manifest, blocked upstream
        assert second["scheduled"] == [MISSED_DAY] and not second["runs"][0]["success"], second
        assert game_day("clock", "advance", "55")["now"] == MISSED_AT  # past the deadline; nobody ticks
        moved = time.time()

        deadline = time.monotonic() + 150
        while True:
            # Every measuring sensor of both daemons evaluated at least once after the move.
            latest = [each.ticks(s)[-1:] for each in (daemon, refused) for s in MEASURING_SENSORS]
            if all(last and last[0].timestamp > moved for last in latest):
                break
            daemon.alive()
            refused.alive()
            assert time.monotonic() < deadline, ("no incident_sensor tick after the game day's last move",
                                                 daemon.log.read_text()[-2000:], refused.log.read_text()[-2000:])
            time.sleep(1)
        ticks = {s: daemon.ticks(s) for s in MEASURING_SENSORS}
        refused_ticks = {s: refused.ticks(s) for s in MEASURING_SENSORS}
        refused_runs = refused.instance.get_runs()
    finally:
        for each in (daemon, refused):
            each.stop()
        for each in (daemon, refused):  # both at once: a graceful stop takes seconds
            each.ended()
    log, refused_log = daemon.log.read_text(), refused.log.read_text()

    # The daemon with no clock asked for followed the home: it measured the missed day, at logical time.
    measured = [(r["partition"], r["objective"], r["value"], r["recorded_at"]) for r in env.ledger.slos.records()]
    window = (parse_ts(GAME_DAY_START), parse_ts(MISSED_AT))
    outside = [m for m in measured if not window[0] <= parse_ts(m[3]) <= window[1]]
    assert measured and not outside, f"measured outside the game day {GAME_DAY_START}..{MISSED_AT}: {outside}"
    missed = [(r["objective"], r["value"], r["met"], r["recorded_at"]) for r in env.ledger.slos.records(MISSED_DAY)]
    assert missed == [("availability", 60.0, False, MISSED_AT)], (missed, log[-3000:])
    # The tick that measured it says so (the one after the move, or one that began as the clock moved).
    opened = [t for t in ticks["incident_sensor"] if t.timestamp > moved - 10
              and (t.skip_reason or "").startswith("incidents opened or updated: INC-")]
    assert opened, [(t.timestamp - moved, t.skip_reason) for t in ticks["incident_sensor"]]
    delivered = {r["objective"]: r["value"] for r in env.ledger.slos.records("2026-09-21")}
    assert 0 <= delivered["availability"] <= 60 and 0 <= delivered["freshness"] <= 60, delivered  # 08:20 logical
    assert not any((t.skip_reason or "").startswith(REFUSAL) for s in ticks.values() for t in s), log[-3000:]
    assert all(t.status != TickStatus.FAILURE for s in ticks.values() for t in s), log[-3000:]

    # The daemon that asked for the system clock was refused on every tick: one line, nothing requested or run.
    for sensor, sensor_ticks in refused_ticks.items():
        assert sensor_ticks, (sensor, refused_log[-3000:])
        for tick in sensor_ticks:
            assert tick.status == TickStatus.SKIPPED and not tick.run_ids, (sensor, tick, refused_log[-3000:])
            reason = tick.skip_reason or ""
            assert reason.startswith(f"{REFUSAL} (chosen ") and "\n" not in reason, (sensor, reason)
            assert f"asks for the system clock (${CLOCK_ENV})" in reason and f"{CLOCK_ENV}=logical" in reason, reason
    assert refused_ticks["incident_sensor"][-1].timestamp > moved  # it was asked when the missed day was owed
    assert not refused_runs
    assert f"Sensor incident_sensor skipped: {REFUSAL}" in refused_log
