"""Ctrl-C (SIGINT to the process group, as a terminal sends it) or SIGTERM during a backfill: the command stops,
prints one line and exits 130; Dagster's helper processes print nothing and are gone."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import psutil
import pytest

from atlasmart_dagster.store.instance.dagster_instance import dagster_instance
from atlasmart_dagster.store.home import AtlasmartHome
from atlasmart_dagster_tests.environment import SAMPLE_DAYS

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
ATLASMART = Path(sys.executable).parent / "atlasmart"  # the installed command line


def backfill_args(env) -> list[str]:
    return ["--home", str(env.home), "--landing", str(env.landing), "backfill", "--from", SAMPLE_DAYS[0],
            "--to", SAMPLE_DAYS[-1], "--operator", "oncall", "--reason", "interrupt test"]


def start(command: list[str]) -> subprocess.Popen:
    # A session of its own: the test signals the whole process group, as a terminal does.
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def wait_for(child: subprocess.Popen, ready, what: str, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        assert child.poll() is None, f"the command ended before {what}: {child.communicate()}"
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.05)


def helpers_of(pid: int) -> list[psutil.Process]:
    """Dagster's compute-log helpers (tail, watch_orphans.py) of the command."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [c for c in children if "watch_orphans.py" in " ".join(c.cmdline()) or c.name() == "tail"]


def stopped(child: subprocess.Popen, signum: int, within: float) -> tuple[int, str, str]:
    os.killpg(child.pid, signum)
    try:
        out, err = child.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        pytest.fail(f"still running {within} s after the signal")
    return child.returncode, out, err


def test_ctrl_c_while_the_run_executes_exits_130_with_one_line_and_no_helper_traceback(env):
    child = start([str(ATLASMART), *backfill_args(env)])
    try:
        wait_for(child, lambda: len(helpers_of(child.pid)) >= 2, "the run's compute-log helpers")
        helpers = helpers_of(child.pid)
        code, _, err = stopped(child, signal.SIGINT, within=60)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert (code, err) == (130, "atlasmart: interrupted\n")
    assert not [h for h in helpers if h.is_running() and h.status() != psutil.STATUS_ZOMBIE]
    instance = dagster_instance(AtlasmartHome.resolve(str(env.home)))
    statuses = {r.dagster_run.status for r in instance.get_run_records()}
    assert statuses == {dg.DagsterRunStatus.FAILURE}  # the run is recorded as ended, not left STARTED


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_signal_in_a_step_with_retries_stops_the_run_at_once(env, signum):
    """Dagster retries an interrupted step that has a retry policy; the command must stop instead."""
    marker = env.home / "locks" / "paused-before-commit-fact_sales"
    child = start([sys.executable, "-m", "atlasmart_dagster_tests.e2e.pause_before_commit", "fact_sales", "120",
                   *backfill_args(env)])
    try:
        wait_for(child, marker.exists, "the fact_sales commit")
        code, _, err = stopped(child, signum, within=60)  # the paused step would sleep 120 s, and again on retry
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert (code, err) == (130, "atlasmart: interrupted\n")
