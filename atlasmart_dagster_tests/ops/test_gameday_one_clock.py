"""A game day on logical time beside a daemon on the same home: the daemon's sensors measure on logical time too.

The daemon's code location is started as `dg dev` is, with no clock asked for;
between the game day's ticks it evaluates the sensors it runs (through
``build_sensor_context``, on its own resource and instance). Before a home had
one clock, those sensors measured the game day on the system clock (an
availability of 100581 minutes, MISSED).
"""

from __future__ import annotations

import json

import dagster as dg
import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.defs.resources import AtlasmartResource
from atlasmart_dagster.store.clock import LogicalClock, parse_ts
from atlasmart_dagster.store.home import CLOCK_ENV
from atlasmart_dagster_tests.environment import Env


@pytest.fixture
def env(tmp_path, monkeypatch) -> Env:
    monkeypatch.delenv(CLOCK_ENV, raising=False)
    return Env(tmp_path)  # the code location as the UI and the daemon load it: no clock asked for


def game_day(env, capsys, *args):
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical",
                 "--ephemeral-instance", "--json", *args])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


class Daemon:
    """The sensors the daemon runs, each tick on a resource built anew from the code location's config."""

    def __init__(self, env: Env):
        self.env, self.instance, self.cursors = env, dg.DagsterInstance.ephemeral(), {}

    def tick(self) -> list:
        results = []
        for sensor in self.env.defs.sensors:
            resource = AtlasmartResource(home=str(self.env.home), landing=str(self.env.landing))
            context = dg.build_sensor_context(instance=self.instance, resources={"atlasmart": resource},
                                              cursor=self.cursors.get(sensor.name))
            results.append(sensor(context))
            self.cursors[sensor.name] = context.cursor
        return results


def measured_on(env) -> list[tuple[str, str, float | None, str]]:
    return [(r["partition"], r["objective"], r["value"], r["recorded_at"]) for r in env.ledger.slos.records()]


def test_a_logical_game_day_is_measured_on_logical_time_by_the_daemon_on_the_same_home(env, capsys):
    daemon = Daemon(env)
    assert game_day(env, capsys, "clock", "set", "2026-09-22T08:20:00Z")[0] == 0  # the home runs on logical
    code, first = game_day(env, capsys, "tick")
    assert code == 0 and first["scheduled"] == ["2026-09-21"]
    daemon.tick()
    assert game_day(env, capsys, "clock", "advance", "1440")[0] == 0  # 2026-09-22 never lands: it is missed
    game_day(env, capsys, "tick")
    daemon.tick()
    assert game_day(env, capsys, "clock", "advance", "120")[0] == 0
    daemon.tick()

    logical_now = LogicalClock(env.home / "clock.json").now()
    measured = measured_on(env)
    availability = [m for m in measured if m[1] == "availability"]
    assert {m[0] for m in availability} >= {"2026-09-21", "2026-09-22"}
    assert all(parse_ts(at) <= logical_now for *_, at in measured), measured  # none on the system clock's now
    assert all(value is None or value < 3 * 1440 for _, _, value, _ in availability), availability


def test_a_daemon_that_asks_for_the_system_clock_skips_a_logical_home_and_measures_nothing(env, capsys,
                                                                                             monkeypatch):
    assert game_day(env, capsys, "clock", "set", "2026-09-22T08:20:00Z")[0] == 0
    assert game_day(env, capsys, "tick")[0] == 0
    measured = measured_on(env)
    monkeypatch.setenv(CLOCK_ENV, "system")  # the daemon was started with ATLASMART_CLOCK=system
    results = Daemon(env).tick()
    skipped = [r.skip_message for r in results if isinstance(r, dg.SkipReason)
               and r.skip_message.startswith("this home runs on the logical clock")]
    assert len(skipped) == 3  # every sensor on the platform; stale_run_sensor reads only Dagster's runs
    assert measured_on(env) == measured
