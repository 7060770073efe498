"""OpenTelemetry traces of the runs: one trace per Dagster run, a span per run, per step and per partition.

Off unless the standard variables say where to send spans:
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``
(OTLP over HTTP/protobuf), and not ``OTEL_SDK_DISABLED=true``;
``OTEL_SERVICE_NAME`` names the service (``atlasmart`` by default). Off,
neither OpenTelemetry's API nor its SDK is imported, a step's trace is a
no-op object, and nothing is computed for an attribute (docs/tracing.md has
the measured cost).

A run's steps execute wherever its launcher puts them (this process, a run
worker, a Celery worker on another machine), so nothing can hand them the
run's span. Its trace id and span id are derived from the Dagster run id
instead (``run_span_context``): every step span, in whatever process, names
the same parent, and whoever learns when the run started and ended emits the
run span with exactly that id (``record_run``): ``ops/runs/chains.py`` for runs
executed in process, the certification sensor for every other ended run.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

import dagster as dg

from ..product.lanes import LANE_TAG
from ..product.pii import redact
from .partitions import partition_keys_from_tags

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.trace import Span, SpanContext, Tracer

DEFAULT_SERVICE_NAME = "atlasmart"
# Set on a run whose own process emits its run span (runs executed in process),
# so the certification sensor does not emit it a second time.
RUN_SPAN_TAG = "atlasmart/run_span"
IN_PROCESS = "in_process"
# How long the end of a step or run waits for its spans to leave. A collector
# that is down makes the exporter retry for its whole timeout (10 s by
# default); a load must not wait that long at every step for its traces.
FLUSH_WAIT_SECONDS = 2.0

_ENDS = {
    dg.DagsterEventType.STEP_SUCCESS: "success",
    dg.DagsterEventType.STEP_FAILURE: "failure",
    dg.DagsterEventType.STEP_UP_FOR_RETRY: "up_for_retry",
}
_RUN_OUTCOMES = {
    dg.DagsterRunStatus.SUCCESS: "success",
    dg.DagsterRunStatus.FAILURE: "failure",
    dg.DagsterRunStatus.CANCELED: "canceled",
}
# Fields of a partition's log line that are not figures of the partition (they have their own attributes).
_NOT_FIGURES = {"event", "asset", "partition", "lane", "batch_ids", "outcome"}

_lock = threading.Lock()
_provider: TracerProvider | None = None
_tracer: Tracer | None = None
_configured = False
_flushing = threading.Event()
# (trace id, span id) the next span started in this context must carry: the run span's derived ids.
_FIXED_IDS: ContextVar[tuple[int, int] | None] = ContextVar("atlasmart_fixed_span_ids", default=None)


def _exporting() -> bool:
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def _make_provider(processor: SpanProcessor) -> TracerProvider:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class RunIds(RandomIdGenerator):
        """The SDK's random ids, except for a run span, which carries the ids derived from its run id."""

        def generate_span_id(self) -> int:
            fixed = _FIXED_IDS.get()
            return fixed[1] if fixed else super().generate_span_id()

        def generate_trace_id(self) -> int:
            fixed = _FIXED_IDS.get()
            return fixed[0] if fixed else super().generate_trace_id()

        def is_trace_id_random(self) -> bool:
            return _FIXED_IDS.get() is None and super().is_trace_id_random()

    service = os.environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
    # Not shut down at exit by the SDK, which waits up to 30 s for a collector that is down (``_current``).
    provider = TracerProvider(resource=Resource.create({"service.name": service}), id_generator=RunIds(),
                              shutdown_on_exit=False)
    provider.add_span_processor(processor)
    return provider


def _current() -> Tracer | None:
    """The tracer spans are made with, or None when tracing is off (read from the environment once)."""
    global _configured, _provider, _tracer
    if not _configured:
        with _lock:
            if not _configured:
                if _exporting():
                    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
                    from opentelemetry.sdk.trace.export import BatchSpanProcessor

                    # The exporter reads the endpoint, headers, timeout and compression variables itself.
                    processor = BatchSpanProcessor(OTLPSpanExporter())
                    _provider = _make_provider(processor)
                    _tracer = _provider.get_tracer(__name__)
                    # What is left is sent at exit, for as long as a flush may wait.
                    atexit.register(_waiting_at_most, processor.shutdown, FLUSH_WAIT_SECONDS)
                _configured = True
    return _tracer


def install(processor: SpanProcessor | None) -> None:
    """Send this process's spans to ``processor`` (tests: the SDK's in-memory exporter); None: back to the environment.

    Replaces whatever the environment configured; the previous provider is
    shut down (it sends what it still held first).
    """
    global _configured, _provider, _tracer
    with _lock:
        if _provider is not None:
            _provider.shutdown()
        _provider = _tracer = None
        _configured = False
        if processor is not None:
            _provider = _make_provider(processor)
            _tracer = _provider.get_tracer(__name__)
            _configured = True


def enabled() -> bool:
    """Whether spans are recorded and sent in this process."""
    return _current() is not None


def flush(wait: float = FLUSH_WAIT_SECONDS) -> None:
    """Send the spans ended so far, waiting at most ``wait`` seconds (a process may exit right after)."""
    provider = _provider
    if provider is None or _flushing.is_set():
        return  # the collector is slow or down: the spans wait in the processor's queue, the load does not
    _flushing.set()

    def send() -> None:
        try:
            provider.force_flush()
        finally:
            _flushing.clear()

    _waiting_at_most(send, wait)


def _waiting_at_most(call: Callable[[], Any], wait: float) -> None:
    """``call()`` in a thread of its own, waited for ``wait`` seconds at most (the SDK's own waits are 10 to 30 s)."""
    sender = threading.Thread(target=call, name="atlasmart-trace-flush", daemon=True)
    sender.start()
    sender.join(wait)


# -- ids derived from the run id ---------------------------------------------


def run_ids(run_id: str) -> tuple[int, int]:
    """(trace id, span id) of a run's span: the first 16 and the next 8 bytes of sha256(run id)."""
    digest = hashlib.sha256(run_id.encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


def run_span_context(run_id: str) -> SpanContext:
    from opentelemetry.trace import SpanContext, TraceFlags

    trace_id, span_id = run_ids(run_id)
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _under_run(run_id: str) -> Context:
    from opentelemetry import trace

    return trace.set_span_in_context(trace.NonRecordingSpan(run_span_context(run_id)))


@contextmanager
def _run_span_ids(run_id: str) -> Iterator[None]:
    token = _FIXED_IDS.set(run_ids(run_id))
    try:
        yield
    finally:
        _FIXED_IDS.reset(token)


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _failed(span: Span, description: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, redact(description)[:500]))


# -- runs --------------------------------------------------------------------


def record_run(record: dg.RunRecord | None, failures: Iterable[str] = (), send: bool = True) -> None:
    """Emit the span of an ended run from its run record (its start, end, status and tags); ``send``: flush now."""
    tracer = _current()
    if tracer is None or record is None or record.end_time is None:
        return
    from opentelemetry.context import Context

    run = record.dagster_run
    tags = dict(run.tags)
    partitions = partition_keys_from_tags(tags)
    outcome = _RUN_OUTCOMES.get(run.status, run.status.value.lower())
    attributes: dict[str, Any] = {
        "dagster.run_id": run.run_id,
        "dagster.job_name": run.job_name,
        "dagster.run_status": run.status.value,
        "atlasmart.outcome": outcome,
        "atlasmart.partition_count": len(partitions),
    }
    if LANE_TAG in tags:
        attributes["atlasmart.lane"] = tags[LANE_TAG]
    if partitions:
        attributes["atlasmart.partition_range"] = f"{partitions[0]}..{partitions[-1]}"
    start = record.start_time if record.start_time is not None else record.create_timestamp.timestamp()
    with _run_span_ids(run.run_id):
        span = tracer.start_span(f"run {run.job_name}", context=Context(), start_time=_ns(start), attributes=attributes)
    failures = list(failures)
    if failures:
        span.set_attribute("atlasmart.failures", [redact(f)[:500] for f in failures])
    if outcome != "success":
        _failed(span, failures[0] if failures else f"run {outcome}")
    span.end(end_time=_ns(record.end_time))
    if send:
        flush()


# -- steps and partitions ------------------------------------------------------


class StepTrace:
    """The span of one step and the spans of its partitions.

    The step span starts with the step and ends when Dagster logs the step's
    end (success, failure or a retry) through the step's own log manager, so
    a step that raises, or one stopped by a failed blocking check after its
    last event, ends its span too. Partitions are processed together (in
    chunks), so a partition's span lasts as long as its step; its ``built``
    event marks when its chunk was published.
    """

    def __init__(
        self,
        context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext,
        asset: str,
        lane: str,
        partitions: list[str],
        batch_ids: Callable[[str], list[str]],
    ):
        tracer = _current()
        self.recording = tracer is not None  # off: every method returns at once
        if tracer is None:
            return
        self._tracer, self._batch_ids = tracer, batch_ids
        self._asset, self._partition_keys = asset, partitions
        self._partitions: dict[str, Span] = {}
        self._logged: set[str] = set()  # partitions whose log line gave their outcome and batch ids
        self._checks_failed: dict[str, set[str]] = {}
        run = context.run
        self._common = {"dagster.run_id": run.run_id, "atlasmart.lane": lane, "atlasmart.asset": asset}
        self._start = time.time_ns()
        step_key = context.op_execution_context.op_def.name
        self.span = tracer.start_span(
            f"step {asset}",
            context=_under_run(run.run_id),
            start_time=self._start,
            attributes={
                **self._common,
                "dagster.job_name": run.job_name,
                "dagster.step_key": step_key,
                "dagster.retry_number": getattr(context, "retry_number", 0),
                "atlasmart.partition_count": len(partitions),
                **({"atlasmart.partition_range": f"{partitions[0]}..{partitions[-1]}"} if partitions else {}),
            },
        )
        context.log.addHandler(_StepEnd(self._end))

    def _partition(self, partition: str) -> Span:
        from opentelemetry import trace

        if partition not in self._partitions:
            self._partitions[partition] = self._tracer.start_span(
                f"partition {self._asset}",
                context=trace.set_span_in_context(self.span),
                start_time=self._start,
                attributes={**self._common, "atlasmart.partition": partition},
            )
        return self._partitions[partition]

    def logged(self, partition: str, outcome: str, payload: Mapping[str, Any]) -> None:
        """A partition's log line: its outcome, batch ids and figures become attributes of its span."""
        if not self.recording:
            return
        span = self._partition(partition)
        self._logged.add(partition)
        span.set_attribute("atlasmart.outcome", outcome)
        span.set_attribute("atlasmart.batch_ids", [str(b) for b in payload.get("batch_ids") or []])
        for name, value in payload.items():
            if name not in _NOT_FIGURES:
                _set_figure(span, f"atlasmart.{name}", value)

    def built(self, partition: str, snapshot_id: int, controls: Any, detail: Mapping | None) -> None:
        """A partition published: a ``built`` event at that moment, its control tuple and figures as attributes."""
        if not self.recording:
            return
        span = self._partition(partition)
        span.add_event("built", {"atlasmart.snapshot_id": str(snapshot_id)})
        if controls is not None:
            _set_figure(span, "atlasmart.controls", controls.to_json())
        for name, value in (detail or {}).items():
            if name != "batch_ids":
                _set_figure(span, f"atlasmart.{name}", value)

    def checks(self, outcomes: Iterable[Any]) -> None:
        """Each check's result on each partition (``atlasmart.check.<name>.passed``); a failed blocking check is an error."""
        if not self.recording:
            return
        for outcome in outcomes:
            step_passed = True
            for result in outcome.results:
                span = self._partition(result.partition)
                span.set_attribute(f"atlasmart.check.{outcome.name}.passed", result.passed)
                step_passed = step_passed and result.passed
                if not result.passed and outcome.blocking:
                    self._checks_failed.setdefault(result.partition, set()).add(outcome.name)
                    _failed(span, "blocking check failed: " + ", ".join(sorted(self._checks_failed[result.partition])))
            self.span.set_attribute(f"atlasmart.check.{outcome.name}.passed", step_passed)

    def _end(self, event: dg.DagsterEvent) -> None:
        outcome = _ENDS[event.event_type]
        for partition in self._partition_keys:
            span = self._partition(partition)
            if partition not in self._logged:  # a step that failed before reaching it, or one that logs no lines
                # Only what the step already knows: no store is read inside Dagster's logging call.
                span.set_attribute("atlasmart.batch_ids", [str(b) for b in self._batch_ids(partition) or []])
                if outcome != "success":
                    span.set_attribute("atlasmart.outcome", "not_reached")
        end = time.time_ns()
        for span in self._partitions.values():
            span.end(end_time=end)
        self.span.set_attribute("atlasmart.outcome", outcome)
        if outcome != "success":
            failed = sorted({name for names in self._checks_failed.values() for name in names})
            # Dagster's text for a step a blocking check stopped names no day: the spans' does.
            _failed(self.span, f"blocking check failed: {', '.join(failed)} ({', '.join(sorted(self._checks_failed))})"
                    if failed else _failure_text(event))
        self.span.end(end_time=end)
        flush()


def _failure_text(event: dg.DagsterEvent) -> str:
    data = event.step_failure_data if event.event_type == dg.DagsterEventType.STEP_FAILURE else None
    if data is not None and data.user_failure_data is not None and data.user_failure_data.description:
        return data.user_failure_data.description
    if data is not None and data.error is not None:
        return data.error.message.strip().splitlines()[0]
    return event.message or event.event_type_value


def _set_figure(span: Span, name: str, value: Any) -> None:
    """A figure of a partition as attributes: scalars as they are, a dict one attribute per key, lists of text.

    Text passes the PII redactor, as it does on its way to the JSON logs.
    """
    if isinstance(value, Mapping):
        for key, inner in value.items():
            _set_scalar(span, f"{name}.{key}", inner)
    elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        span.set_attribute(name, [redact(v)[:500] for v in value])
    else:
        _set_scalar(span, name, value)


def _set_scalar(span: Span, name: str, value: Any) -> None:
    if isinstance(value, str):
        span.set_attribute(name, redact(value)[:500])
    elif isinstance(value, bool | int | float):
        span.set_attribute(name, value)


class _StepEnd(logging.Handler):
    """Hears the step's end among the events Dagster logs through the step's log manager (``context.log``)."""

    def __init__(self, on_end: Callable[[dg.DagsterEvent], None]):
        super().__init__()
        self._on_end: Callable[[dg.DagsterEvent], None] | None = on_end

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        event = meta.get("dagster_event")
        if event is None or self._on_end is None or event.event_type not in _ENDS:
            return
        on_end, self._on_end = self._on_end, None  # once, even if Dagster logged another end
        try:
            on_end(event)
        except Exception:  # noqa: BLE001 - observability never fails a step: counted, never raised
            handler_errors.note()

    def handleError(self, record: logging.LogRecord) -> None:
        handler_errors.note()  # not logging's default, which prints a traceback to stderr


class _ErrorCount:
    """How many times this process's tracing handler failed (and swallowed it): a span lost, never a step."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def note(self) -> None:
        with self._lock:
            self.count += 1


handler_errors = _ErrorCount()
