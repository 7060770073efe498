"""A 45 s restart of the S3 gateway in the middle of a load, on the real S3 server, with tracing on and off.

The gateway (``radosgw``) of ``s3-local.sh`` is stopped when the load's
``fact_sales`` step starts and started again 45 s later (the cluster behind
it keeps its objects, as a restarted gateway in front of a real store does).
The step's attempts fail while it is down and are retried inside the storage
retry window (``defs/retries.py``); the run succeeds after the restart, and
every retry is in the ledger, so the ``step_retries`` metric counts them.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from urllib.request import urlopen

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import generate_latest

from atlasmart_dagster.defs import tracing
from atlasmart_dagster.defs.assets.step import STEP_START_HOOKS, Step
from atlasmart_dagster.ops.observability.prometheus import registry_for
from atlasmart_dagster.ops.runs.chains import run_chain, run_reference
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.s3_server import s3_team_environment, server_settings

pytestmark = [pytest.mark.slow, pytest.mark.exclusive]  # it stops the S3 gateway every S3 test uses
DAY = "2026-09-18"
OUTAGE_SECONDS = 45
S3_DIR = Path(os.environ.get("S3_DIR", "/tmp/s3-local"))


def _restart_gateway_after(seconds: float) -> threading.Thread:
    """Stop the server's gateway now; start it again (as ``s3-local.sh`` does) after ``seconds``."""
    pid_file = S3_DIR / "rgw.pid"
    if not pid_file.is_file():
        pytest.skip(f"no gateway pid file at {pid_file}: the server was not started by s3-local.sh")
    pid = int(pid_file.read_text())
    os.kill(pid, 15)
    for _ in range(40):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.25)

    def restart() -> None:
        time.sleep(seconds)
        with open(S3_DIR / "log" / "rgw.out", "ab") as out:
            gateway = subprocess.Popen(["radosgw", "-c", str(S3_DIR / "ceph.conf"), "-n", "client.rgw.a", "-f"],
                                       stdout=out, stderr=out, start_new_session=True)
        pid_file.write_text(f"{gateway.pid}\n")
        for _ in range(240):  # answering again (a few seconds), before the test goes on
            try:
                urlopen(server_settings()["AWS_ENDPOINT_URL"], timeout=2).close()
                return
            except OSError:
                time.sleep(0.5)

    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("traced", [False, True], ids=["tracing-off", "tracing-on"])
def test_a_45_s_gateway_restart_mid_load_is_retried_and_the_retries_are_counted(traced, tmp_path, monkeypatch):
    exporter = InMemorySpanExporter()
    tracing.install(SimpleSpanProcessor(exporter) if traced else None)
    restarted: list[threading.Thread] = []

    def outage(step: Step) -> None:
        if step.asset == "fact_sales" and not restarted:
            restarted.append(_restart_gateway_after(OUTAGE_SECONDS))

    with s3_team_environment(monkeypatch):
        env = Env(tmp_path)
        assert run_reference(env.defs, env.instance)
        STEP_START_HOOKS.append(outage)
        try:
            started = time.monotonic()
            outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
            took = time.monotonic() - started
        finally:
            STEP_START_HOOKS.remove(outage)
            tracing.install(None)
            for thread in restarted:
                thread.join()
        assert restarted, "the outage began mid-load"
        assert outcome.success, f"the run failed after the restart: {outcome}"
        assert took >= OUTAGE_SECONDS
        events = [e.event_type_value for e in outcome.result.all_events if e.step_key == "fact_sales"]
        retried = events.count("STEP_RESTARTED")
        assert retried >= 1 and "STEP_FAILURE" not in events
        recorded = [r for r in env.platform.ledger.runs.retries() if r["run_id"] == outcome.run_id]
        assert [r["asset"] for r in recorded] == ["fact_sales"] * retried
        metrics = generate_latest(registry_for(env.platform)).decode()
        assert f'atlasmart_step_retries_total{{asset="fact_sales"}} {float(retried)}' in metrics
        if traced:
            steps = [s for s in exporter.get_finished_spans() if s.name == "step fact_sales"]
            assert [s.attributes["atlasmart.outcome"] for s in steps][-1] == "success"
        env.platform.ledger.close()
