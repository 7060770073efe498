"""Traces of the daily load: one trace per run, a span per run, step and partition, sent only when configured.

The in-process tests send spans to the SDK's in-memory exporter through a
``BatchSpanProcessor`` (the processor the OTLP configuration uses): spans are
in the exporter when ``run_chain`` returns only because the end of each step
and of the run flushed them. The subprocess tests run a real load the way a
user's command does, with the standard variables set (a receiver started by
the test answers the OTLP requests) or not set.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import dagster as dg
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from atlasmart_dagster.defs import tracing
from atlasmart_dagster.defs.automation.certification_sensor import certification_tick
from atlasmart_dagster.domain.check_names import SOURCE_CONTRACT_CONFORMS
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.lanes import BACKFILL, LANE_TAG
from atlasmart_dagster.store.ledger.partition_states import BUILT
from atlasmart_dagster.store.tables import RAW_ORDER_LINES
from atlasmart_dagster_tests.environment import SAMPLE_DAYS
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

REPO = Path(__file__).resolve().parents[2]
DAYS = SAMPLE_DAYS[:2]
# The steps of the daily chain, in the order they run (stg_order_lines also writes the quarantine).
CHAIN_STEPS = ["raw_order_lines", "stg_order_lines", "fact_sales", "agg_daily_sales", "metric_gross_revenue",
               "mart_executive_revenue", "mart_finance_daily_sales"]


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    tracing.install(BatchSpanProcessor(exporter))
    yield exporter
    tracing.install(None)


def derived_ids(run_id: str) -> tuple[int, int]:
    """What every process must agree on without talking: sha256(run id), 16 bytes of trace id, 8 of span id."""
    digest = hashlib.sha256(run_id.encode()).digest()
    return int.from_bytes(digest[:16], "big"), int.from_bytes(digest[16:24], "big")


def children(spans, parent) -> list:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def run_spans(spans, run_id: str) -> list:
    return [s for s in spans if s.parent is None and s.attributes["dagster.run_id"] == run_id]


def check_names(env, asset: str) -> set[str]:
    graph = env.defs.resolve_asset_graph()
    return {k.name for k in graph.asset_check_keys if k.asset_key == dg.AssetKey(asset)}


def test_a_range_run_is_one_trace_of_its_run_its_steps_and_their_partitions(env, spans):
    outcome = run_chain(env.defs, env.instance, env.platform, DAYS, lane=BACKFILL, log_level="ERROR")
    assert outcome.success, outcome.failures
    finished = spans.get_finished_spans()  # already sent: nothing waits for the processor's schedule

    trace_id, run_span_id = derived_ids(outcome.run_id)
    (run,) = [s for s in finished if s.parent is None]
    assert run.attributes["dagster.run_id"] == outcome.run_id
    assert (run.context.trace_id, run.context.span_id) == (trace_id, run_span_id)
    assert {s.context.trace_id for s in finished} == {trace_id}
    assert run.name == "run backfill_sales_job"
    assert run.attributes["atlasmart.lane"] == BACKFILL
    assert run.attributes["atlasmart.outcome"] == "success"
    assert run.attributes["atlasmart.partition_range"] == f"{DAYS[0]}..{DAYS[-1]}"
    assert run.status.status_code == StatusCode.UNSET

    steps = sorted(children(finished, run), key=lambda s: s.start_time)
    executed = {e.step_key for e in outcome.result.get_step_success_events()}
    assert [s.attributes["dagster.step_key"] for s in steps] == CHAIN_STEPS
    assert set(CHAIN_STEPS) == executed, "every step Dagster executed has its span, and only those"
    assert len(finished) == 1 + len(CHAIN_STEPS) * (1 + len(DAYS)), "nothing but the run, its steps and their days"
    shown: dict[tuple[str, str], dict] = {}  # (asset, day) -> the attributes of its partition span
    for step in steps:
        asset = step.attributes["atlasmart.asset"]
        assert step.name == f"step {asset}"
        assert step.attributes["dagster.run_id"] == outcome.run_id
        assert step.attributes["atlasmart.outcome"] == "success"
        assert run.start_time <= step.start_time <= step.end_time <= run.end_time
        checks = check_names(env, asset)
        assert checks, f"{asset} has checks to show"
        assert all(step.attributes[f"atlasmart.check.{name}.passed"] is True for name in checks)

        partitions = children(finished, step)
        assert sorted(p.attributes["atlasmart.partition"] for p in partitions) == DAYS
        for span in partitions:
            day = span.attributes["atlasmart.partition"]
            built = env.ledger.partitions.events(asset=RAW_ORDER_LINES.name, partition=day, states=(BUILT,))[-1]
            assert span.name == f"partition {asset}"
            assert step.start_time <= span.start_time <= span.end_time <= step.end_time
            assert span.attributes["dagster.run_id"] == outcome.run_id
            assert span.attributes["atlasmart.lane"] == BACKFILL
            assert span.attributes["atlasmart.asset"] == asset
            assert list(span.attributes["atlasmart.batch_ids"]) == built.detail["batch_ids"]
            assert span.attributes["atlasmart.outcome"] in ("ok", "built")
            assert {name: span.attributes[f"atlasmart.check.{name}.passed"] for name in checks} == dict.fromkeys(checks, True)
            assert span.status.status_code == StatusCode.UNSET
            assert [e.name for e in span.events] == ["built"]
            shown[asset, day] = dict(span.attributes)

    # The figures each layer shows agree with the warehouse and with each other.
    rows = env.warehouse.partition_row_counts(RAW_ORDER_LINES, DAYS)
    for day in DAYS:
        assert shown["raw_order_lines", day]["atlasmart.rows"] == rows[day] > 0
        staged = shown["stg_order_lines", day]
        assert staged["atlasmart.accepted"] + staged["atlasmart.quarantined"] == rows[day]
        paid = shown["fact_sales", day]["atlasmart.rows"]
        for asset in ("fact_sales", "agg_daily_sales", "mart_finance_daily_sales", "mart_executive_revenue"):
            assert shown[asset, day]["atlasmart.controls.paid_lines"] == paid
        assert shown["metric_gross_revenue", day]["atlasmart.revenue_usd"] == \
            shown["agg_daily_sales", day]["atlasmart.controls.revenue_usd"]


def erp_renames_a_field(env, day: str) -> None:
    """The ERP renames a field of the v1 layout on one day (schema drift), with a truthful manifest."""
    rows = read_rows(env.day_dir(day))
    for row in rows:
        row["gross_line_amount_usd"] = row.pop("line_amount_usd")
    write_batch(env.day_dir(day), rows, batch_id=f"ERP-{day.replace('-', '')}-01")


def test_a_failed_blocking_check_is_an_error_on_its_partition_its_step_and_the_run(env, spans):
    bad_day = DAYS[1]
    erp_renames_a_field(env, bad_day)
    outcome = run_chain(env.defs, env.instance, env.platform, DAYS, lane=BACKFILL, log_level="CRITICAL")
    assert not outcome.success
    finished = spans.get_finished_spans()

    (run,) = [s for s in finished if s.parent is None]
    assert run.attributes["dagster.run_id"] == outcome.run_id
    assert run.status.status_code == StatusCode.ERROR
    assert run.attributes["atlasmart.outcome"] == "failure"
    assert SOURCE_CONTRACT_CONFORMS in run.status.description

    (step,) = children(finished, run)  # nothing below the failed check ran
    assert step.attributes["atlasmart.asset"] == RAW_ORDER_LINES.name
    assert step.status.status_code == StatusCode.ERROR
    assert step.status.description == f"blocking check failed: {SOURCE_CONTRACT_CONFORMS} ({bad_day})"
    assert step.attributes["atlasmart.outcome"] == "failure"
    assert step.attributes[f"atlasmart.check.{SOURCE_CONTRACT_CONFORMS}.passed"] is False

    by_day = {p.attributes["atlasmart.partition"]: p for p in children(finished, step)}
    assert sorted(by_day) == DAYS
    bad, good = by_day[bad_day], by_day[DAYS[0]]
    assert bad.status.status_code == StatusCode.ERROR
    assert SOURCE_CONTRACT_CONFORMS in bad.status.description
    assert bad.attributes[f"atlasmart.check.{SOURCE_CONTRACT_CONFORMS}.passed"] is False
    assert bad.attributes["atlasmart.outcome"] == "contract_violation"
    assert good.status.status_code == StatusCode.UNSET
    assert good.attributes[f"atlasmart.check.{SOURCE_CONTRACT_CONFORMS}.passed"] is True


def test_the_certification_sensor_emits_the_span_of_a_run_no_process_of_ours_ended_once(env, spans):
    """A run executed elsewhere (here: straight through Dagster, as a run worker or ``dagster asset materialize``
    does) gets its run span from the sensor; a run ``run_chain`` executed is not emitted a second time."""
    job = env.defs.resolve_job_def("backfill_sales_job")
    elsewhere = job.execute_in_process(instance=env.instance, partition_key=DAYS[0], tags={LANE_TAG: BACKFILL},
                                       raise_on_error=False)
    assert elsewhere.success
    sent = spans.get_finished_spans()
    assert not run_spans(sent, elsewhere.run_id)
    # Each step sent its spans as it ended: a step's process may end with it (a run worker, a Celery task).
    assert sorted(s.attributes["dagster.step_key"] for s in sent if s.name.startswith("step ")) == sorted(CHAIN_STEPS)

    _, cursor, _, _ = certification_tick(env.instance, env.platform, None, actor="certification_sensor")
    here = run_chain(env.defs, env.instance, env.platform, [DAYS[1]], lane=BACKFILL, log_level="ERROR")
    certification_tick(env.instance, env.platform, cursor, actor="certification_sensor")

    finished = spans.get_finished_spans()
    (run,) = run_spans(finished, elsewhere.run_id)
    record = env.instance.get_run_record_by_id(elsewhere.run_id)
    assert (run.context.trace_id, run.context.span_id) == derived_ids(elsewhere.run_id)
    assert (run.start_time, run.end_time) == (int(record.start_time * 1e9), int(record.end_time * 1e9))
    assert run.attributes["atlasmart.outcome"] == "success"
    assert [s.attributes["dagster.step_key"] for s in sorted(children(finished, run), key=lambda s: s.start_time)] \
        == CHAIN_STEPS
    assert len(run_spans(finished, here.run_id)) == 1


# -- the user's command, with and without the variables ------------------------

LOAD = """
import json, sys
from pathlib import Path
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster_tests.environment import Env
env = Env(Path(sys.argv[1]))
outcome = run_chain(env.defs, env.instance, env.platform, [sys.argv[2]], lane="backfill", log_level="CRITICAL")
print(json.dumps({"run_id": outcome.run_id, "success": outcome.success,
                  "tags": dict(env.instance.get_run_by_id(outcome.run_id).tags),
                  "otel_loaded": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}))
"""


class Receiver:
    """An OTLP/HTTP endpoint in a thread: records every request body and answers 200."""

    def __init__(self):
        self.requests: list[tuple[str, bytes]] = []
        received = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[tuple[str, object]]:
        """(service.name, span) for every span received."""
        out = []
        for _, body in self.requests:
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
                out += [(service, span) for scope in resource_spans.scope_spans for span in scope.spans]
        return out


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.server.shutdown()


def load_in_a_process(tmp_path, variables: dict[str, str]) -> dict:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environment.update(variables, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path / "scratch"), DAYS[0]], env=environment,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("variables", [{}, {"OTEL_SDK_DISABLED": "true"}], ids=["no endpoint", "sdk disabled"])
def test_off_a_load_imports_nothing_of_opentelemetry_and_sends_nothing(tmp_path, receiver, variables):
    if variables:
        variables = {**variables, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    loaded = load_in_a_process(tmp_path, variables)
    assert loaded["success"]
    assert loaded["otel_loaded"] == [], "neither the SDK nor the API"
    assert tracing.RUN_SPAN_TAG not in loaded["tags"]
    assert receiver.requests == []


@pytest.mark.parametrize("service", [None, "atlasmart-nightly"])
def test_on_a_short_lived_load_sends_its_whole_trace_over_otlp(tmp_path, receiver, service):
    variables = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url} | ({"OTEL_SERVICE_NAME": service} if service else {})
    loaded = load_in_a_process(tmp_path, variables)
    assert loaded["success"]
    assert loaded["tags"][tracing.RUN_SPAN_TAG] == tracing.IN_PROCESS

    assert {path for path, _ in receiver.requests} == {"/v1/traces"}
    received = receiver.spans()
    assert {name for name, _ in received} == {service or "atlasmart"}
    trace_id, run_span_id = derived_ids(loaded["run_id"])
    spans = [span for _, span in received]
    assert {int.from_bytes(s.trace_id, "big") for s in spans} == {trace_id}
    (run,) = [s for s in spans if not s.parent_span_id]
    assert int.from_bytes(run.span_id, "big") == run_span_id
    steps = [s for s in spans if int.from_bytes(s.parent_span_id, "big") == run_span_id]
    assert sorted(s.name for s in steps) == sorted(f"step {name}" for name in CHAIN_STEPS)
    assert len(spans) == 1 + 2 * len(CHAIN_STEPS), "each step with its one day"


SENSOR_TICK = """
import sys
import dagster as dg
from atlasmart_dagster.defs.automation.certification_sensor import certification_tick
from atlasmart_dagster.defs.resources import AtlasmartResource
platform = AtlasmartResource(home=sys.argv[1], landing=sys.argv[2]).platform
with dg.DagsterInstance.get() as instance:
    certification_tick(instance, platform, None, actor="certification_sensor")
"""


def test_dagster_asset_materialize_and_the_sensor_send_one_trace_from_two_processes(env, receiver):
    """The user's command executes the run (its steps send their spans); the certification sensor's
    process, which knows when the run ended, sends the run span its steps named as their parent."""
    bindir = Path(sys.executable).parent
    shell = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "DAGSTER_HOME"))}
    shell.update(ATLASMART_HOME=str(env.home), ATLASMART_LANDING=str(env.landing), PYTHONPATH=str(REPO))
    prepared = subprocess.run([bindir / "atlasmart", "dagster-home"], env=shell, capture_output=True, text=True,
                              timeout=120)
    assert prepared.returncode == 0, prepared.stderr[-2000:]
    shell.update(DAGSTER_HOME=prepared.stdout.strip(), OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
    materialize = subprocess.run(
        [bindir / "dagster", "asset", "materialize", "-m", "atlasmart_dagster", "--select",
         "raw_order_lines,stg_order_lines,quarantine_order_lines,fact_sales,agg_daily_sales,metric_gross_revenue,"
         "mart_finance_daily_sales,mart_executive_revenue", "--partition", DAYS[0]],
        env=shell, capture_output=True, text=True, timeout=300)
    assert materialize.returncode == 0, materialize.stderr[-3000:]
    run_id = re.search(r" - ([0-9a-f-]{36}) - .*RUN_SUCCESS", materialize.stderr).group(1)
    trace_id, run_span_id = derived_ids(run_id)
    spans = [span for _, span in receiver.spans()]
    assert spans and all(int.from_bytes(s.trace_id, "big") == trace_id for s in spans)
    assert not [s for s in spans if not s.parent_span_id], "the command does not know the run's span"
    steps = [s for s in spans if int.from_bytes(s.parent_span_id, "big") == run_span_id]
    assert sorted(s.name for s in steps) == sorted(f"step {name}" for name in CHAIN_STEPS)

    tick = subprocess.run([sys.executable, "-c", SENSOR_TICK, str(env.home), str(env.landing)], env=shell,
                          capture_output=True, text=True, timeout=300)
    assert tick.returncode == 0, tick.stderr[-3000:]
    spans = [span for _, span in receiver.spans()]
    (run,) = [s for s in spans if not s.parent_span_id]
    assert (int.from_bytes(run.trace_id, "big"), int.from_bytes(run.span_id, "big")) == (trace_id, run_span_id)
    assert run.name.startswith("run ")  # the job `dagster asset materialize` made
    assert all(run.start_time_unix_nano <= s.start_time_unix_nano <= s.end_time_unix_nano <= run.end_time_unix_nano
               for s in steps)
    assert len(spans) == 1 + 2 * len(CHAIN_STEPS)


def test_a_tracing_error_at_a_step_end_is_counted_and_never_fails_the_step(env, spans):
    """The store a step's end would read is down: the trace loses that, the step is retried and the run succeeds."""
    from atlasmart_dagster.defs.assets.step import STEP_START_HOOKS
    from atlasmart_dagster.drills.faults import INJECT_TRANSIENT_TAG, transient_faults_by_tag
    from atlasmart_dagster.errors import TransientError

    def storage_down(partition: str):
        raise TransientError(f"the object store is unavailable (batch ids of {partition})")

    def break_the_trace(step) -> None:
        if step.asset == "fact_sales" and step.trace.recording:
            step.trace._batch_ids = storage_down

    before = tracing.handler_errors.count
    STEP_START_HOOKS.insert(0, break_the_trace)
    try:
        with transient_faults_by_tag():
            outcome = run_chain(env.defs, env.instance, env.platform, DAYS[:1], lane="backfill",
                                tags={INJECT_TRANSIENT_TAG: "fact_sales"})
    finally:
        STEP_START_HOOKS.remove(break_the_trace)
    assert outcome.success
    events = [e.event_type_value for e in outcome.result.all_events if e.step_key == "fact_sales"]
    assert "STEP_UP_FOR_RETRY" in events and events[-1] == "STEP_SUCCESS"
    assert tracing.handler_errors.count > before, "the swallowed error is counted"
