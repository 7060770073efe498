"""A run whose process was killed is marked failed and stops holding its lane; a live one is left alone."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import dagster as dg

from atlasmart_dagster.defs.automation.run_reaper import reap_dead_runs

CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import dagster as dg
    from atlasmart_dagster.defs.automation.run_reaper import worker_tags

    @dg.op
    def wait_forever():
        Path(sys.argv[1]).write_text("started")
        time.sleep(600)

    @dg.job
    def long_job():
        wait_forever()

    long_job.execute_in_process(instance=dg.DagsterInstance.get(), tags={"atlasmart/lane": "backfill", **worker_tags()})
    """
)


@contextmanager
def run_in_a_child(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen]]:
    """A run of ``long_job`` started by a child process on a fresh DAGSTER_HOME: (the home, the child).

    Returns once the run's op has started; the child's process group is killed at the end if still alive.
    """
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    marker = tmp_path / "started"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(marker)], env={**os.environ, "DAGSTER_HOME": str(home)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None and time.monotonic() < deadline, "the child never started its run"
            time.sleep(0.2)
        yield home, child
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)


def test_a_killed_run_is_marked_failed_and_a_live_one_is_not(tmp_path):
    with run_in_a_child(tmp_path) as (home, child):
        with dg.DagsterInstance.from_config(str(home)) as instance:
            (record,) = instance.get_run_records()
            assert record.dagster_run.status == dg.DagsterRunStatus.STARTED
            assert reap_dead_runs(instance) == []  # its worker is alive: left alone
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
            assert instance.get_run_by_id(record.dagster_run.run_id).status == dg.DagsterRunStatus.STARTED
            assert reap_dead_runs(instance) == [record.dagster_run.run_id]
            assert instance.get_run_by_id(record.dagster_run.run_id).status == dg.DagsterRunStatus.FAILURE
            assert reap_dead_runs(instance) == []  # once
