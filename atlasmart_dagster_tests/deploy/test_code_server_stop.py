"""A code server started in the background by a script stops on SIGTERM, within a grace period.

Started with ``&`` by a non-interactive shell, ``dagster api grpc`` inherits
SIGINT ignored and Dagster copies that onto SIGTERM: before
``defs/dagster_interrupts_adapter.py`` it outlived SIGTERM until SIGKILL. Started the way
an operator's script does: ``bash -c '...; dagster api grpc ... &'`` in a
session of its own.
"""

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GRACE_SECONDS = 10


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ignored(pid: int) -> set[int]:
    """The signals the kernel discards for the process (SigIgn of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            mask = int(line.split()[1], 16)
            return {n for n in range(1, 65) if mask >> (n - 1) & 1}
    raise AssertionError("no SigIgn line")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie of ours cannot linger: the server is the shell's child, reparented to init
    return Path(f"/proc/{pid}").exists() and "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_backgrounded_code_server_stops_on_sigterm(tmp_path):
    dagster = Path(sys.executable).with_name("dagster")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    port, pid_file, log = _free_port(), tmp_path / "server.pid", tmp_path / "server.log"
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    env.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
    # A simple command after `&`, so $! is the server itself; no job control (bash -c), so
    # bash starts it with SIGINT and SIGQUIT ignored.
    script = (
        f"cd {shlex.quote(str(ROOT))}; "
        f"{shlex.quote(str(dagster))} api grpc -m atlasmart_dagster.definitions -p {port} "
        f">{shlex.quote(str(log))} 2>&1 & echo $! >{shlex.quote(str(pid_file))}"
    )
    subprocess.run(["bash", "-c", script], env=env, check=True, start_new_session=True, timeout=30)
    pid = int(pid_file.read_text())
    try:
        deadline = time.monotonic() + 180
        while subprocess.run([str(dagster), "api", "grpc-health-check", "-p", str(port)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
            assert _alive(pid), f"the code server died while starting:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"the code server never answered:\n{log.read_text()}"
            time.sleep(0.5)
        ignored = _ignored(pid)
        # the condition that made it hang: started by a shell that ignored SIGQUIT and SIGINT for it
        assert signal.SIGQUIT in ignored, "the server was not started as a background job of a non-interactive shell"

        os.kill(pid, signal.SIGTERM)
        stopped = time.monotonic()
        while _alive(pid) and time.monotonic() - stopped < GRACE_SECONDS:
            time.sleep(0.1)
        assert not _alive(pid), f"still running {GRACE_SECONDS} s after SIGTERM; it ignored {sorted(ignored)}"
        assert "Shutting down Dagster code server" in log.read_text(), "it did not shut down cleanly"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
