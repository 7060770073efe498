"""A scheduled load stopped before it finished (SIGTERM, SIGKILL) is loaded again by the next tick, at most
three attempts; a load that failed for a reason a retry cannot cure is not retried, and says so."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.defs.automation.load_retries import ATTEMPT_TAG, MAX_LOAD_ATTEMPTS, RETRY_OF_TAG
from atlasmart_dagster.ops.gameday import tick
from atlasmart_dagster.store.ledger.incidents import IncidentStore
from atlasmart_dagster.store import warehouse
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster.store.instance.dagster_instance import dagster_instance
from atlasmart_dagster.store.home import AtlasmartHome
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAY = "2026-09-21"  # ready at 08:04; the 08:00 schedule of 2026-09-22 loads it
NOW = "2026-09-22T08:05:00Z"
REPO = Path(__file__).resolve().parents[3]


def one_day_env(tmp_path) -> Env:
    env = Env(tmp_path, clock="logical")
    for day in SAMPLE_DAYS:
        if day != DAY:
            shutil.rmtree(env.day_dir(day))
    LogicalClock(env.home / "clock.json").set(NOW)
    return env


@pytest.fixture
def sigterm_at_fact_commit():
    """SIGTERM to this process while fact_sales commits, as `kill PID` would: ``times`` times, then no more."""
    state = {"left": 0}

    def hook(home, name: str) -> None:
        if name == "fact_sales" and state["left"] > 0:
            state["left"] -= 1
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the signal is handled here, as it would be in the middle of a commit

    warehouse.COMMIT_HOOKS.append(hook)
    yield state
    warehouse.COMMIT_HOOKS.remove(hook)


def load_runs(env, day=DAY):
    return sorted(env.instance.get_run_records(filters=dg.RunsFilter(tags={"dagster/partition": day})),
                  key=lambda r: r.create_timestamp)


def test_a_scheduled_load_stopped_by_sigterm_is_loaded_again_by_the_next_tick(tmp_path, sigterm_at_fact_commit):
    env = one_day_env(tmp_path)
    sigterm_at_fact_commit["left"] = 1
    with pytest.raises(KeyboardInterrupt):  # the tick stops with its run, as `atlasmart tick` exits 130
        tick(env.defs, env.instance, env.platform)
    (first,) = load_runs(env)
    assert first.dagster_run.status == dg.DagsterRunStatus.FAILURE
    assert [b["batch_id"] for b in env.ledger.batches.list(DAY)] == ["ERP-20260921-01"]  # recorded: "loaded"

    report = tick(env.defs, env.instance, env.platform)  # the same logical time: 08:00 is evaluated again
    assert report.scheduled == [] and report.sensor == [DAY]
    assert any("did not finish" in s and "by landing_manifest_sensor" in s for s in report.skipped), report.skipped
    assert [r["certified"] for r in report.runs] == [[DAY]]
    retry = load_runs(env)[-1].dagster_run
    assert (retry.tags[RETRY_OF_TAG], retry.tags[ATTEMPT_TAG]) == ("ERP-20260921-01", "2")

    again = tick(env.defs, env.instance, env.platform)
    assert again.runs == [] and not any(DAY in s for s in again.skipped)  # finished: nothing more


def test_retries_are_bounded_and_the_day_s_incident_says_automation_gave_up(tmp_path, sigterm_at_fact_commit):
    env = one_day_env(tmp_path)
    sigterm_at_fact_commit["left"] = MAX_LOAD_ATTEMPTS
    for _ in range(MAX_LOAD_ATTEMPTS):
        with pytest.raises(KeyboardInterrupt):
            tick(env.defs, env.instance, env.platform)
    assert len(load_runs(env)) == MAX_LOAD_ATTEMPTS

    report = tick(env.defs, env.instance, env.platform)
    assert report.runs == [] and len(load_runs(env)) == MAX_LOAD_ATTEMPTS
    assert any(f"gave up after {MAX_LOAD_ATTEMPTS} attempts" in s for s in report.skipped), report.skipped
    (incident,) = [i for i in IncidentStore(env.ledger).open_incidents() if DAY in i.partitions]
    gave_up = [s for s in incident.signals if s["key"] == f"load_gave_up:{DAY}:ERP-20260921-01"]
    assert len(gave_up) == 1 and "backfill the day" in gave_up[0]["detail"]
    assert incident.id in report.incidents

    tick(env.defs, env.instance, env.platform)
    (incident,) = [i for i in IncidentStore(env.ledger).open_incidents() if DAY in i.partitions]
    assert len([s for s in incident.signals if s["key"].startswith("load_gave_up:")]) == 1  # said once


def test_a_load_a_retry_cannot_cure_is_not_retried_and_the_tick_says_why(tmp_path):
    env = one_day_env(tmp_path)
    rows = [{**row, "coupon_code": "AUTUMN"} for row in read_rows(env.day_dir(DAY))]
    write_batch(env.day_dir(DAY), rows, batch_id="ERP-20260921-01", ready_at="2026-09-22T08:04:00Z")
    first = tick(env.defs, env.instance, env.platform)
    assert [r["success"] for r in first.runs] == [False]  # the contract gate stopped it after raw

    LogicalClock(env.home / "clock.json").set("2026-09-22T09:05:00Z")
    report = tick(env.defs, env.instance, env.platform)
    assert report.runs == [] and len(load_runs(env)) == 1
    assert any("not retried, a retry would fail the same way" in s and "source_contract_conforms" in s
               for s in report.skipped), report.skipped


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_tick_process_stopped_mid_load_is_followed_by_a_tick_that_loads_the_day(tmp_path, monkeypatch, signum):
    """The finding as an operator meets it: `atlasmart tick` killed in the middle of the scheduled load."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    env = one_day_env(tmp_path)
    args = ["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical"]
    marker = env.home / "locks" / "paused-before-commit-fact_sales"
    child = subprocess.Popen([sys.executable, "-m", "atlasmart_dagster_tests.e2e.pause_before_commit", "fact_sales",
                              "120", *args, "tick"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert child.poll() is None and time.monotonic() < deadline, "the load never reached the fact commit"
            time.sleep(0.1)
        marker.unlink()
        os.killpg(child.pid, signum)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert child.returncode == (130 if signum == signal.SIGTERM else -signal.SIGKILL), err

    assert main([*args, "--json", "tick"]) == 0  # in this process: the home's own Dagster instance
    instance = dagster_instance(AtlasmartHome.resolve(str(env.home)))
    runs = sorted(instance.get_run_records(filters=dg.RunsFilter(tags={"dagster/partition": DAY})),
                  key=lambda r: r.create_timestamp)
    assert [r.dagster_run.status for r in runs] == [dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.SUCCESS]
    assert runs[-1].dagster_run.tags[ATTEMPT_TAG] == "2"
    served = env.ledger.partitions.served("mart_finance_daily_sales", DAY)
    assert served is not None
