"""Team Celery workers started as deploy/README.md says: no secret on disk, unique names, one step at a time.

Two workers are started on this host with the worker command of
deploy/README.md, word for word through bash, against the local RabbitMQ with
a scratch virtual host and user whose password is random (created and deleted
here with ``rabbitmqctl``). Then:

* both answer a ping under different names;
* each runs the number of pool processes the README states (one: one step at
  a time);
* a step of a job on the project's Celery executor runs on one of them, and
  afterwards no file under ``DAGSTER_HOME`` or the test's folder, and no
  worker's command line, holds the password (`dagster-celery worker start`
  wrote it to ``$DAGSTER_HOME/dagster_celery/config/<uuid>/dagster_celery_config.py``).
"""

from __future__ import annotations

import importlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import dagster as dg
import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
README = REPO / "deploy" / "README.md"

pytestmark = pytest.mark.slow


def documented_worker_command() -> str:
    """The command deploy/README.md gives for a Celery worker: the line after its `# Celery workers` comment."""
    text = README.read_text()
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("# Celery workers"):
                command = next(x for x in lines[i + 1:] if x.strip() and not x.startswith("#"))
                return command.strip()
    raise AssertionError("deploy/README.md gives no Celery worker command (after `# Celery workers` in a bash block)")


def _rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def broker():
    """A scratch RabbitMQ virtual host and user with a random password; (url, password)."""
    name = f"atlasmart_t_{uuid.uuid4().hex[:10]}"
    password = secrets.token_hex(16)
    try:
        if shutil.which("rabbitmqctl") is None:
            raise RuntimeError("rabbitmqctl not found")
        _rabbitmqctl("add_vhost", name)
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        message = f"cannot create a RabbitMQ virtual host with rabbitmqctl ({exc}); the Celery worker tests need one"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    try:
        _rabbitmqctl("add_user", name, password)
        _rabbitmqctl("set_permissions", "-p", name, name, ".*", ".*", ".*")
        yield f"amqp://{name}:{password}@127.0.0.1:5672/{name}", password
    finally:
        subprocess.run(["rabbitmqctl", "delete_user", name], capture_output=True, timeout=60)
        subprocess.run(["rabbitmqctl", "delete_vhost", name], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def workers(broker, tmp_path_factory):
    """Two workers started with the documented command on this host; yields what the tests need."""
    url, password = broker
    root = tmp_path_factory.mktemp("celery")
    dagster_home = root / "dagster"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    dg.DagsterInstance.from_config(str(dagster_home)).dispose()  # its tables exist before any worker starts
    env = {
        **os.environ,
        "DAGSTER_HOME": str(dagster_home),
        "ATLASMART_HOME": str(root / "home"),
        "ATLASMART_EXECUTOR": "celery",
        "ATLASMART_CELERY_BROKER": url,
        "ATLASMART_CELERY_QUEUE": f"atlasmart-test-{uuid.uuid4().hex[:8]}",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
    }
    command = documented_worker_command()
    started = []
    for i in (1, 2):
        log = open(root / f"worker-{i}.log", "w")
        started.append(subprocess.Popen(["bash", "-c", command], env=env, cwd=REPO, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True))
    from celery import Celery

    control = Celery(broker=url)
    replies: list[dict] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(replies) < 2:
        replies = control.control.ping(timeout=2)
    try:
        yield {"env": env, "root": root, "dagster_home": dagster_home, "password": password, "control": control,
               "replies": replies, "processes": started, "command": command}
    finally:
        for process in started:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=60)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=60)
            try:  # anything left of the group (pool processes) goes too
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _logs(workers) -> str:
    return "\n".join(f"== {p.name}\n{p.read_text()[-2000:]}" for p in sorted(workers["root"].glob("worker-*.log")))


def test_two_workers_on_one_host_get_different_names(workers):
    names = [name for reply in workers["replies"] for name in reply]
    assert len(names) == 2, f"{len(names)} of 2 workers answer ({names}): {workers['command']}\n{_logs(workers)}"
    assert len(set(names)) == 2, f"two workers on one host share a name: {names}"


def test_each_worker_runs_the_one_step_at_a_time_the_readme_states(workers):
    assert "one step at a time" in README.read_text()
    stats = workers["control"].control.inspect(timeout=5).stats() or {}
    assert len(stats) == 2, _logs(workers)
    for name, worker in stats.items():
        assert worker["pool"]["max-concurrency"] == 1, f"{name} runs {worker['pool']['max-concurrency']} steps at once"
        assert len(worker["pool"]["processes"]) == 1, f"{name} has pool processes {worker['pool']['processes']}"


def test_a_step_runs_on_a_worker_and_the_broker_password_is_in_no_file(workers, monkeypatch):
    for key in ("DAGSTER_HOME", "ATLASMART_EXECUTOR", "ATLASMART_CELERY_BROKER", "ATLASMART_CELERY_QUEUE"):
        monkeypatch.setenv(key, workers["env"][key])
    monkeypatch.syspath_prepend(str(REPO))
    probe = importlib.reload(importlib.import_module("atlasmart_dagster_tests.deploy.celery_probe"))
    with dg.DagsterInstance.from_config(str(workers["dagster_home"])) as instance:
        with dg.execute_job(dg.reconstructable(probe.celery_probe_job), instance=instance) as result:
            assert result.success, _logs(workers)
            where = result.output_for_node("where_it_ran")
    pool = set()
    for shell in workers["processes"]:
        for child in psutil.Process(shell.pid).children(recursive=True):
            pool.add(str(child.pid))
    assert where.split(":")[1] in pool, f"the step ran in {where}, not in a worker's process {sorted(pool)}"

    password = workers["password"].encode()
    # Everything the workers and the run wrote: DAGSTER_HOME (the instance, the step's output and logs) is inside.
    leaked = [str(path) for path in workers["root"].rglob("*") if path.is_file() and password in path.read_bytes()]
    assert not leaked, f"the broker password is written in {leaked}"
    assert not (workers["dagster_home"] / "dagster_celery").exists()
    for shell in workers["processes"]:
        for process in [psutil.Process(shell.pid), *psutil.Process(shell.pid).children(recursive=True)]:
            command_line = " ".join(process.cmdline())
            assert workers["password"] not in command_line, f"the password is on {process.pid}'s command line"
