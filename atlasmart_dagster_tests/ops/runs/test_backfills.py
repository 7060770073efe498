"""Operator backfills: scoped, recorded, in the backfill lane, repeatable."""

import json

import pytest

from atlasmart_dagster.errors import LaneViolation
from atlasmart_dagster.ops.runs.backfills import BackfillRequest, run_backfill
from atlasmart_dagster.store.ledger.incidents import IncidentStore
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.published_controls import fingerprints_of
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster.store.ledger.partition_states import CERTIFIED
from atlasmart_dagster.store.tables import FACT_SALES, MART_FINANCE_DAILY_SALES
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.team_database import deployment  # noqa: F401 - both deployments


@pytest.fixture
def env(tmp_path, deployment) -> Env:  # noqa: F811 - the imported fixture
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T09:00:00Z")  # current partition: 2026-09-21
    return env


def fingerprints(env, days):
    return {(s.name, d): fp for s in (FACT_SALES, MART_FINANCE_DAILY_SALES)
            for d, fp in fingerprints_of(env.warehouse, s, days).items()}


def test_backfill_of_history_leaves_the_current_day_alone_and_twice_changes_nothing(env, capsys):
    from atlasmart_dagster.cli.main import main

    assert run_chain(env.defs, env.instance, env.platform, ["2026-09-21"], lane="current").certified == ["2026-09-21"]
    current_before = fingerprints(env, ["2026-09-21"])
    incident = IncidentStore(env.ledger).open("history missing", "alice", env.platform.clock.now()).id
    args = ["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical", "--ephemeral-instance",
            "backfill", "--from", "2026-09-17", "--to", "2026-09-20", "--operator", "alice",
            "--reason", "initial history load", "--incident", incident, "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["lane"] == "backfill" and first["certified"] == SAMPLE_DAYS[:4] and first["request_id"] == "BF-0001"
    history_after_first = fingerprints(env, SAMPLE_DAYS[:4])
    versions_first = {d: env.ledger.partitions.served("mart_finance_daily_sales", d).version for d in SAMPLE_DAYS[:4]}

    assert main(args) == 0
    capsys.readouterr()
    assert fingerprints(env, SAMPLE_DAYS[:4]) == history_after_first
    assert {d: env.ledger.partitions.served("mart_finance_daily_sales", d).version for d in SAMPLE_DAYS[:4]} == versions_first
    assert fingerprints(env, ["2026-09-21"]) == current_before

    recorded = [b for b in env.ledger.backfills.list() if b["event"] == "FINISHED"]
    assert [(b["request_id"], b["operator"], b["reason"], b["incident_id"], bool(b["success"])) for b in recorded] == [
        ("BF-0001", "alice", "initial history load", incident, True),
        ("BF-0002", "alice", "initial history load", incident, True),
    ]
    runs = {e.run_id for e in env.ledger.partitions.events(asset="mart_finance_daily_sales", states=(CERTIFIED,)) if e.lane == "backfill"}
    assert len(runs) == 2  # each backfill was a single run for the whole range


def test_backfill_refuses_the_current_day_unless_named(env):
    request = BackfillRequest("2026-09-20", "2026-09-21", "alice", "repair")
    with pytest.raises(LaneViolation, match="includes the current partition 2026-09-21"):
        run_backfill(env.defs, env.instance, env.platform, request)
    outcome = run_backfill(env.defs, env.instance, env.platform,
                           BackfillRequest("2026-09-20", "2026-09-21", "alice", "repair", include_current=True))
    assert outcome.success and outcome.certified == ["2026-09-20", "2026-09-21"]


def test_the_lane_guard_also_stops_ui_backfills_that_include_the_current_day(env):
    outcome = run_chain(env.defs, env.instance, env.platform, ["2026-09-20", "2026-09-21"], lane="backfill")
    assert not outcome.success
    assert "backfill lane may not rewrite the current partition 2026-09-21" in outcome.failures[0]


@pytest.mark.parametrize("kwargs,problem", [
    ({"operator": " "}, "--operator is required"),
    ({"reason": ""}, "--reason is required"),
    ({"start": "2026-09-20", "end": "2026-09-18"}, "is after --to"),
    ({"start_at": "dashboard"}, "--start-at must be one of"),
])
def test_backfill_requests_must_say_who_why_and_what(env, kwargs, problem):
    fields = {"start": "2026-09-18", "end": "2026-09-19", "operator": "alice", "reason": "repair", **kwargs}
    assert any(problem in p for p in BackfillRequest(**fields).validate(env.platform))


def test_the_backfill_lane_admits_one_in_process_backfill_at_a_time(env):
    from atlasmart_dagster.store.locks import lane_lock

    with lane_lock(env.platform.home, "backfill"):
        with pytest.raises(LaneViolation, match="backfill lane is busy"):
            run_backfill(env.defs, env.instance, env.platform, BackfillRequest("2026-09-18", "2026-09-18", "bob", "x"))
