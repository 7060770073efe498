"""SLO arithmetic on partition timelines."""

from datetime import datetime

import pytest

from atlasmart_dagster.product.slo import Timeline, due_at, due_state, evaluate, scheduled_at


def at(hm: str, day: str = "2026-09-22") -> datetime:
    return datetime.fromisoformat(f"{day}T{hm}:00+00:00")


def timeline(ready, start, end, certified, manifest_rows=2, staged=2):
    return Timeline("2026-09-21", at(ready), scheduled_at("2026-09-21"), at(start), at(end), at(certified), manifest_rows, staged)


def by_objective(results):
    return {r.objective: r for r in results}


def test_healthy_day():
    r = by_objective(evaluate(timeline("08:04", "08:05", "08:12", "08:16")))
    assert [(o, r[o].value, r[o].met) for o in ("freshness", "completeness", "duration", "availability")] == [
        ("freshness", 12, True), ("completeness", 100, True), ("duration", 7, True), ("availability", 16, True)]


def test_source_late_misses_availability_by_48_minutes():
    r = by_objective(evaluate(timeline("09:05", "09:06", "09:14", "09:18")))
    assert r["availability"].value == 78 and not r["availability"].met and r["availability"].missed_by == 48
    assert "MISSED by 48 min" in r["availability"].describe()
    assert r["freshness"].met  # the platform itself was quick once the source was ready


@pytest.mark.parametrize("staged,pct,met", [(2, 100, True), (1, 50, False)])
def test_completeness(staged, pct, met):
    r = by_objective(evaluate(timeline("08:04", "08:05", "08:12", "08:16", manifest_rows=2, staged=staged)))
    assert (r["completeness"].value, r["completeness"].met) == (pct, met)


def test_long_run_misses_duration():
    r = by_objective(evaluate(timeline("08:04", "08:05", "08:20", "08:21")))
    assert not r["duration"].met and r["duration"].missed_by == 5


def test_schedule_and_deadline():
    assert scheduled_at("2026-09-21") == at("08:00")
    assert due_at("2026-09-21") == at("08:30")


@pytest.mark.parametrize("now,certified,state,minutes", [
    ("06:00", False, "not due yet", 150),
    ("08:40", False, "overdue", 10),
    ("08:21", True, "certified", None),
])
def test_due_state(now, certified, state, minutes):
    due = due_state("2026-09-21", at(now), certified)
    assert (due["state"], due["minutes"], due["due_at"]) == (state, minutes, "2026-09-22T08:30:00Z")


def test_rerunning_a_day_first_delivered_by_a_backfill_is_not_an_slo_event(env):
    """History loaded in the backfill lane, then re-run from the job page (current lane): no SLO, no miss."""
    from atlasmart_dagster.ops.runs.chains import run_chain

    day = "2026-09-20"
    assert run_chain(env.defs, env.instance, env.platform, [day], lane="backfill").certified == [day]
    again = run_chain(env.defs, env.instance, env.platform, [day], lane="current")
    assert again.certified == [day]
    assert env.ledger.slos.records(day) == []  # was: every objective 'missed' by weeks, and an incident


def test_a_day_certified_before_its_schedule_waited_zero_minutes_never_a_negative_figure():
    r = by_objective(evaluate(timeline("07:20", "07:25", "07:30", "07:38")))["availability"]
    assert r.value == 0 and r.met
    assert "22 min before the schedule" in r.detail and "-" not in r.value_text
