"""The logical clock stays where the partitions are, and a tick survives a clock that was set outside them."""

import json

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.store.clock import LogicalClock


def cli(env, capsys, *args, clock=None):
    base = ["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", "--json"]
    code = main(base + (["--clock", clock] if clock else []) + list(args))
    captured = capsys.readouterr()
    out = json.loads(captured.out) if captured.out.strip().startswith("{") else captured.out
    return code, out, captured.err


def logical_now(env) -> str:
    return json.loads((env.home / "clock.json").read_text())["now"]


@pytest.mark.parametrize("value", ["2020-01-01T09:00:00Z", "2026-09-16T23:59:59Z", "9999-12-31T00:00:00Z"])
def test_clock_set_refuses_a_time_outside_the_partitions_and_says_the_range(env, capsys, value):
    assert cli(env, capsys, "clock", "set", "2026-09-22T08:00:00Z")[0] == 0
    code, _, err = cli(env, capsys, "clock", "set", value)
    assert code == 2
    assert err.count("\n") == 1 and "outside the accepted range 2026-09-17T00:00:00Z to " in err
    assert "the clock was not changed" in err
    assert logical_now(env) == "2026-09-22T08:00:00Z"


@pytest.mark.parametrize("minutes", ["nan", "inf", "-inf", "1e308", "-1e308", "-8000"])
def test_clock_advance_refuses_what_is_not_a_finite_move_inside_the_range(env, capsys, minutes):
    assert cli(env, capsys, "clock", "set", "2026-09-22T08:00:00Z")[0] == 0
    code, _, err = cli(env, capsys, "clock", "advance", "--", minutes)
    assert code == 2, err
    assert "unexpected" not in err and "accepted range" in err and "2026-09-17T00:00:00Z to " in err
    assert logical_now(env) == "2026-09-22T08:00:00Z"


def test_clock_advance_within_the_range_still_moves(env, capsys):
    assert cli(env, capsys, "clock", "set", "2026-09-22T08:00:00Z")[0] == 0
    code, out, _ = cli(env, capsys, "clock", "advance", "-30")
    assert code == 0 and out["now"] == "2026-09-22T07:30:00Z"
    assert out["accepted"]["from"] == "2026-09-17T00:00:00Z"


def test_a_morning_whose_day_is_not_a_partition_is_skipped_with_its_reason(env, capsys):
    """At 2026-09-17T09:00 the 08:00 schedule would load 2026-09-16, the day before the first partition."""
    assert cli(env, capsys, "clock", "set", "2026-09-17T09:00:00Z")[0] == 0
    code, report, err = cli(env, capsys, "tick", clock="logical")
    assert code == 0, err
    assert report["scheduled"] == [] and report["runs"] == []
    assert "schedule 2026-09-17T08:00:00Z: skipped, they load days before the first partition 2026-09-17" in \
        report[
        "skipped"]


def test_a_tick_at_a_clock_set_before_the_partitions_skips_then_the_clock_recovers(env, capsys):
    """A home whose clock was set before the first partition (before `clock set` checked it) ticks, then recovers."""
    LogicalClock(env.home / "clock.json").set("2020-01-01T09:00:00Z")
    code, report, err = cli(env, capsys, "tick", clock="logical")
    assert code == 0, err
    assert report["runs"] == [] and "schedule 2020-01-01T08:00:00Z: skipped, they load days before the first " \
        "partition 2026-09-17" in report["skipped"]

    assert cli(env, capsys, "clock", "set", "2026-09-18T08:10:00Z")[0] == 0
    code, report, err = cli(env, capsys, "tick", clock="logical")
    assert code == 0, err
    assert report["scheduled"] == ["2026-09-17"]  # the 08:00 morning after the clock came back
    assert [r["certified"] for r in report["runs"]] == [["2026-09-17"]]


def test_a_tick_at_a_clock_set_far_ahead_skips_and_a_clock_set_back_ticks_again(env, capsys):
    """At 9999 every morning's day is not a partition yet; that tick must not silence the mornings once set back."""
    LogicalClock(env.home / "clock.json").set("9999-12-31T09:00:00Z")
    code, report, err = cli(env, capsys, "tick", clock="logical")
    assert code == 0, err
    skipped = "schedule 9999-12-31T08:00:00Z: skipped, their days are not partitions yet"
    assert report["scheduled"] == [] and any(s.startswith(skipped) for s in report["skipped"])

    assert cli(env, capsys, "clock", "set", "2026-09-18T08:10:00Z")[0] == 0
    code, report, err = cli(env, capsys, "tick", clock="logical")
    assert code == 0, err
    # The landing sensor loaded every landed day at 9999; the 08:00 morning is evaluated again, not skipped for ever.
    assert any(s.startswith("schedule 2026-09-18T08:00:00Z: 2026-09-17 was already loaded") for s in report["skipped"])


def test_a_tick_recorded_before_the_first_partition_does_not_break_later_ticks(env, capsys):
    """The issue's sequence: a tick at 2020, then the clock back among the partitions, then a tick."""
    assert cli(env, capsys, "clock", "set", "2026-09-17T09:00:00Z")[0] == 0
    assert cli(env, capsys, "tick", clock="logical")[0] == 0
    LogicalClock(env.home / "clock.json").set("2020-01-01T09:00:00Z")
    assert cli(env, capsys, "tick", clock="logical")[0] == 0
    assert cli(env, capsys, "clock", "set", "2026-09-18T08:10:00Z")[0] == 0
    code, report, err = cli(env, capsys, "tick", clock="logical")
    assert code == 0, err
    assert report["scheduled"] == ["2026-09-17"]
