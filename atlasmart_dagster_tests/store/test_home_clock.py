"""One clock per home: the home records its clock, every process resolves it in one place, the other is refused."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.defs.resources import AtlasmartResource
from atlasmart_dagster.definitions import incident_sensor
from atlasmart_dagster.ops.runs.lane_coordinator import atlasmart_now
from atlasmart_dagster.store.clock import (
    CHOICE_FILE,
    ClockChoice,
    HomeClockRefused,
    LogicalClock,
    SystemClock,
    home_clock,
    parse_ts,
    switch_home_clock,
)
from atlasmart_dagster.store.home import CLOCK_ENV, AtlasmartHome
from atlasmart_dagster.store.platform import Platform

GAME_DAY = "2026-09-22T08:20:00Z"


@pytest.fixture(autouse=True)
def no_clock_asked(monkeypatch):
    """Each test says itself which clock its processes ask for."""
    monkeypatch.delenv(CLOCK_ENV, raising=False)


@pytest.fixture
def home(tmp_path) -> AtlasmartHome:
    return AtlasmartHome(tmp_path / "home").ensure()


def logical_home(home: AtlasmartHome) -> AtlasmartHome:
    LogicalClock(home.clock_file).set(GAME_DAY)
    switch_home_clock(home, "logical", by="gameday-lead")
    return home


def files(home: AtlasmartHome) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in home.root.rglob("*") if p.is_file() and p.parent != home.locks_dir}


def test_a_home_without_a_choice_runs_on_the_system_clock_and_records_nothing_for_a_process_that_does_not_ask(home):
    assert isinstance(home_clock(home), SystemClock)
    assert ClockChoice.read(home) is None and not (home.root / CHOICE_FILE).exists()


@pytest.mark.parametrize("clock", ["system", "logical"])
def test_the_first_clock_asked_for_is_recorded_with_who_and_when(home, clock):
    LogicalClock(home.clock_file).set(GAME_DAY)
    home_clock(home, clock)
    state = json.loads((home.root / CHOICE_FILE).read_text())
    assert state["clock"] == clock and "--clock" in state["how"] and state["by"]
    assert parse_ts(state["chosen_at"]) <= SystemClock().now()


def test_the_environment_variable_is_an_ask_too(home, monkeypatch):
    monkeypatch.setenv(CLOCK_ENV, "system")
    home_clock(home)
    assert ClockChoice.read(home).clock == "system"
    assert "$ATLASMART_CLOCK" in ClockChoice.read(home).how


def test_a_logical_clock_whose_time_is_not_set_is_not_recorded(home):
    """A home cannot run on a clock with no time: the choice waits for `clock set`."""
    assert isinstance(home_clock(home, "logical"), LogicalClock)
    assert ClockChoice.read(home) is None


def test_a_logical_home_refuses_an_explicit_system_process_and_writes_nothing(home, monkeypatch):
    logical_home(home)
    before = files(home)
    with pytest.raises(HomeClockRefused) as refused:
        Platform.open(home=home.root, clock="system")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("this home runs on the logical clock (chosen ")
    assert "ATLASMART_CLOCK=logical" in message and "`atlasmart clock use system`" in message
    monkeypatch.setenv(CLOCK_ENV, "system")
    with pytest.raises(HomeClockRefused, match=r"asks for the system clock \(\$ATLASMART_CLOCK\)"):
        Platform.open(home=home.root)
    assert files(home) == before  # no ledger, no catalog, the choice and logical time unchanged


def test_a_system_home_refuses_an_explicit_logical_process(home):
    home_clock(home, "system")
    LogicalClock(home.clock_file).set(GAME_DAY)
    before = files(home)
    with pytest.raises(HomeClockRefused, match=r"runs on the system clock .*`atlasmart clock use logical`"):
        home_clock(home, "logical")
    assert files(home) == before


def test_a_process_that_does_not_ask_follows_the_homes_clock(home):
    logical_home(home)
    platform = Platform.open(home=home.root)
    assert isinstance(platform.clock, LogicalClock) and platform.clock.now() == parse_ts(GAME_DAY)


def test_the_lane_coordinator_reads_the_homes_clock(home, monkeypatch):
    monkeypatch.setenv("ATLASMART_HOME", str(home.root))
    logical_home(home)
    assert atlasmart_now() == parse_ts(GAME_DAY)
    monkeypatch.setenv(CLOCK_ENV, "system")  # refused: the system time, never a refused run
    assert atlasmart_now() != parse_ts(GAME_DAY)


def test_switching_records_the_actor_and_the_previous_choice(home):
    home_clock(home, "system")
    with pytest.raises(Exception, match="logical clock is not set yet"):
        switch_home_clock(home, "logical", by="oncall")
    assert ClockChoice.read(home).clock == "system"
    LogicalClock(home.clock_file).set(GAME_DAY)
    before, now = switch_home_clock(home, "logical", by="oncall")
    assert before.clock == "system" and (now.clock, now.by, now.how) == ("logical", "oncall", "atlasmart clock use")
    assert ClockChoice.read(home) == now
    assert isinstance(home_clock(home, "logical"), LogicalClock)
    _, again = switch_home_clock(home, "logical", by="someone else")
    assert again == now  # already so: when and by whom it was chosen stay


def test_the_resource_raises_the_refusal_and_sensors_skip_with_it_measuring_nothing(tmp_path, home):
    logical_home(home)
    resource = AtlasmartResource(home=str(home.root), clock="system")
    with pytest.raises(HomeClockRefused, match="the resource's clock setting"):
        resource.platform  # noqa: B018
    before = files(home)
    context = dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral(),
                                      resources={"atlasmart": AtlasmartResource(home=str(home.root), clock="system")})
    result = incident_sensor(context)
    assert isinstance(result, dg.SkipReason)
    assert result.skip_message.startswith("this home runs on the logical clock")
    assert files(home) == before  # no ledger: no measurement


def cli(home, capsys, *args):
    code = main(["--home", str(home.root), "--ephemeral-instance", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_command_line_refuses_with_exit_2_and_one_line_and_clock_use_switches(home, capsys):
    logical_home(home)
    code, _, err = cli(home, capsys, "--clock", "system", "status")
    assert code == 2 and err.count("\n") == 1 and "this home runs on the logical clock" in err
    code, out, _ = cli(home, capsys, "clock", "show")
    assert code == 0 and out.startswith("the home runs on the logical clock") and "gameday-lead" in out
    code, out, _ = cli(home, capsys, "--clock", "logical", "clock", "use", "system", "--by", "oncall")
    assert code == 0 and "runs on the system clock from now on (was logical since" in out
    assert "this shell still asks for the logical clock (--clock)" in out
    assert ClockChoice.read(home).by == "oncall"
    code, _, err = cli(home, capsys, "--clock", "logical", "clock", "advance", "10")
    assert code == 2 and "runs on the system clock" in err
    assert LogicalClock(home.clock_file).now() == parse_ts(GAME_DAY)  # refused before anything changed
    code, out, _ = cli(home, capsys, "--json", "clock", "show")
    assert json.loads(out)["home_clock"] == "system" and json.loads(out)["chosen"]["by"] == "oncall"
