"""Running the daily chain in-process against a real Dagster instance, then certifying.

The command line, the drills and the tests start runs through these functions
so that what they do is what the schedule, the sensors and the UI do: the same
jobs, the same lane tags, and the same certification gate after the run.
"""

from __future__ import annotations

import _thread
import json
import select
import signal
import socket
import threading
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

import dagster as dg

from ...defs import tracing
from ...defs.automation.jobs import backfill_sales_job, daily_sales_job
from ...defs.checks.certification_checks import report_day_states
from ...defs.partitions import range_tags
from ...domain.check_names import SOURCE_CONTRACT_CONFORMS
from ...product.certification_gate import GateDecision, certified_partitions
from ...product.lanes import BACKFILL, CURRENT, LANE_TAG, current_partition
from ...product.run_certification import certify_run, certify_run_read
from ...store.ledger.partition_states import BUILT
from ...store.platform import Platform
from .dagster_backfill_adapter import queue_asset_backfill
from .queue import launch_job_run, require_daemon, run_events, wait_for_backfill, wait_for_run
from ...defs.automation.run_reaper import reap_dead_runs, worker_tags


@dataclass
class RunOutcome:
    run_id: str
    partitions: list[str]
    lane: str
    success: bool
    failures: list[str] = field(default_factory=list)
    decisions: list[GateDecision] = field(default_factory=list)
    result: dg.ExecuteInProcessResult | None = field(default=None, repr=False)
    request_id: str | None = None
    backfill_id: str | None = None  # the Dagster backfill the outcome was waited for through (team deployment)

    @property
    def certified(self) -> list[str]:
        return certified_partitions(self.decisions)

    def to_json(self) -> dict:
        return {
            "run_id": self.run_id,
            "partitions": self.partitions,
            "lane": self.lane,
            "success": self.success,
            "failures": self.failures,
            "certified": self.certified,
            "refused": [d.to_json() for d in self.decisions if not d.certified],
        }


def failure_messages(events: Sequence[dg.DagsterEvent]) -> list[str]:
    """One line per failed step, then one per failed blocking check: which check, which days, what it saw.

    Dagster reports a step stopped by a blocking check as "1 blocking asset
    check failed with ERROR severity"; the operator needs the check, the days
    and the fields instead.
    """
    messages = []
    for event in events:
        if event.event_type == dg.DagsterEventType.STEP_FAILURE:
            data = event.step_failure_data
            if data.user_failure_data is not None and data.user_failure_data.description:
                text = data.user_failure_data.description
            elif data.error is not None:
                text = data.error.message.strip().splitlines()[0]
            else:
                text = "step failed"
            messages.append(f"{event.step_key}: {text}")
        elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            evaluation = event.event_specific_data
            if not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR:
                messages.append(_failed_check_message(evaluation))
    return messages


def _failed_check_message(evaluation) -> str:
    metadata = {k: v.value for k, v in evaluation.metadata.items()}
    days = metadata.get("failing_partitions", "")
    found = metadata.get("observed_vs_expected") or {}
    details = []
    for day, result in found.items():
        if result.get("passed"):
            continue
        observed = result.get("observed")
        if evaluation.check_name == SOURCE_CONTRACT_CONFORMS and isinstance(observed, dict):
            for batch, layout in sorted(observed.items()):
                parts = [f"missing {', '.join(layout['missing'])}" if layout.get("missing") else "",
                         f"unexpected {', '.join(layout['unexpected'])}" if layout.get("unexpected") else ""]
                if any(parts):
                    details.append(f"batch {batch} ({layout.get('contract')}): {'; '.join(p for p in parts if p)}")
        elif isinstance(observed, dict) and observed.get("breaches"):
            details.extend(f"{day}: {b}" for b in observed["breaches"])
        else:
            details.append(f"{day}: observed {json.dumps(observed, default=str)}, "
                           f"expected {json.dumps(result.get('expected'), default=str)}")
    text = "; ".join(details)[:400] or metadata.get("rule", "")
    return f"blocking check {evaluation.asset_key.to_user_string()}:{evaluation.check_name} failed for {days}: {text}"


def console_config(log_level: str | None) -> dict:
    return {"loggers": {"console": {"config": {"log_level": log_level}}}} if log_level else {}


def subset_job(defs: dg.Definitions, job: dg.JobDefinition, assets: Sequence[dg.AssetKey]) -> dg.JobDefinition:
    """The job narrowed to ``assets`` with their checks."""
    keys = set(assets)
    checks = {k for k in defs.resolve_asset_graph().asset_check_keys if k.asset_key in keys}
    return job.get_subset(asset_selection=keys, asset_check_selection=checks)


# Signals that ask a command to stop. Dagster maps SIGTERM to its SIGINT handler while a run executes.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Sent to the main thread only, to end a blocking call there (sleep, select, a lock) so that it handles
# the stop signal the watcher thread received; ignored by default, so it cannot harm a process it strays to.
_WAKE = signal.SIGURG


@contextmanager
def interruptible_run() -> Iterator[Callable[[], bool]]:
    """Execute an in-process run so that Ctrl-C (or SIGTERM) stops it and nothing but the command reports it.

    Yields a function that says whether a stop signal arrived meanwhile;
    ``execute_in_process`` inside then raises nothing itself, so the caller
    raises ``KeyboardInterrupt`` once the run has returned. Three things
    Dagster does in process are handled here:

    * its compute-log helpers (``tail`` and ``watch_orphans.py``) are started
      in the terminal's process group, so a Ctrl-C reached them too and each
      printed a KeyboardInterrupt traceback: SIGINT is blocked in this thread
      while the run starts them, and children inherit the blocked signal
      (the signal still reaches this process, through a watcher thread
      started before the block);
    * a stop signal is noticed through ``signal.set_wakeup_fd``, whichever
      handler Dagster has installed at that moment (it only records one
      between steps);
    * a step with a retry policy treats an interrupt as a reason to retry
      it: the watcher repeats the interrupt until the run returns (waking a
      blocking call of this thread with a harmless signal), so the retried
      step stops at its start and the run ends interrupted.

    Off the main thread, where signals cannot be handled (and Dagster handles
    none either), the run executes as before.
    """
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    noticed, returned = threading.Event(), threading.Event()
    with ExitStack() as stack:  # every undo runs, even if an interrupt lands in one of them
        receiver, sender = socket.socketpair()
        stack.callback(sender.close)
        stack.callback(receiver.close)
        for end in (receiver, sender):
            end.setblocking(False)
        previous = signal.set_wakeup_fd(sender.fileno(), warn_on_full_buffer=False)
        stack.callback(signal.set_wakeup_fd, previous)
        stack.callback(signal.signal, _WAKE, signal.signal(_WAKE, lambda signum, frame: None))
        main = threading.main_thread().ident

        def watch() -> None:
            while not returned.is_set():
                if select.select([receiver], [], [], 0.25)[0]:
                    try:
                        if set(receiver.recv(64)) & set(STOP_SIGNALS):
                            noticed.set()
                    except BlockingIOError:
                        pass
                if noticed.is_set() and not returned.is_set():
                    _thread.interrupt_main()  # Dagster's handler: raise in a step, or note it for the next step
                    signal.pthread_kill(main, _WAKE)

        watcher = threading.Thread(target=watch, name="atlasmart-interrupts", daemon=True)
        watcher.start()  # before the block below: this thread keeps receiving SIGINT
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        # Undone last first: stop repeating the interrupt, wait for the watcher, unblock SIGINT.
        stack.callback(signal.pthread_sigmask, signal.SIG_SETMASK, blocked)
        stack.callback(watcher.join)
        stack.callback(returned.set)
        try:
            yield noticed.is_set
        except KeyboardInterrupt:
            noticed.set()  # a repeated interrupt that landed after Dagster put our handler back


def _execute(job: dg.JobDefinition, **kwargs) -> dg.ExecuteInProcessResult:
    """``job.execute_in_process`` that a stop signal ends: KeyboardInterrupt once the run has returned.

    With tracing on, the run's span is emitted here, where the run ended
    (and the run is tagged so that the certification sensor does not emit it too).
    """
    result = None
    traced = tracing.enabled() and kwargs.get("instance") is not None
    if traced:
        kwargs["tags"] = {**(kwargs.get("tags") or {}), tracing.RUN_SPAN_TAG: tracing.IN_PROCESS}
    with interruptible_run() as interrupted:
        result = job.execute_in_process(**kwargs)
    if traced and result is not None:
        tracing.record_run(kwargs["instance"].get_run_record_by_id(result.run_id),
                           [] if result.success else failure_messages(result.all_events))
    if interrupted() or result is None:
        raise KeyboardInterrupt(f"run {result.run_id} was interrupted" if result is not None else "interrupted")
    return result


def lane_for(platform: Platform, partitions: Sequence[str]) -> str:
    """Current lane only for the current day; anything older is backfill-lane work."""
    current = current_partition(platform.clock.now())
    return CURRENT if list(partitions) == [current] else BACKFILL


def run_chain(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    platform: Platform,
    partitions: Sequence[str],
    lane: str | None = None,
    tags: Mapping[str, str] | None = None,
    certify: bool = True,
    asset_selection: Sequence[dg.AssetKey] | None = None,
    log_level: str | None = None,
    progress=None,
    backfill_id: str | None = None,
) -> RunOutcome:
    """One run of the daily chain over ``partitions`` (a single day or a contiguous range).

    ``asset_selection`` narrows the run to part of the chain (with its checks).
    ``log_level`` sets what Dagster's console logger prints (the event log
    stores everything regardless). ``backfill_id`` (team deployment) is a
    Dagster backfill of this very work to wait for instead of queueing one.
    """
    partitions = sorted(partitions)
    lane = lane or lane_for(platform, partitions)
    if platform.home.team and not instance.is_ephemeral:
        return run_through_queue(defs, instance, platform, partitions, lane, tags, certify, asset_selection,
                                 backfill_id)
    job = defs.resolve_job_def((daily_sales_job if lane == CURRENT else backfill_sales_job).name)
    if asset_selection is not None:
        job = subset_job(defs, job, asset_selection)
    reap_dead_runs(instance)  # a killed earlier run must not hold the lane this one needs
    run_tags = {LANE_TAG: lane, **worker_tags(), **(tags or {})}
    run_id = str(uuid.uuid4())
    watcher = LedgerProgress(platform, run_id, progress) if progress is not None else None
    try:
        if len(partitions) == 1:
            result = _execute(
                job,
                run_config=console_config(log_level),
                instance=instance,
                partition_key=partitions[0],
                tags=run_tags,
                raise_on_error=False,
                run_id=run_id,
            )
        else:
            run_tags.update(range_tags(partitions[0], partitions[-1]))
            result = _execute(
                job, run_config=console_config(log_level), instance=instance, tags=run_tags, raise_on_error=False,
                run_id=run_id,
            )
    finally:
        if watcher is not None:
            watcher.stop()
    outcome = RunOutcome(
        run_id=result.run_id,
        partitions=list(partitions),
        lane=lane,
        success=result.success,
        failures=[] if result.success else failure_messages(result.all_events),
        result=result,
    )
    if certify:
        certified = certify_run_read(platform, result.run_id, result.success, actor="atlasmart")
        outcome.decisions = certified.decisions
        report_day_states(instance, platform, partitions, certified.states)
    return outcome


def run_through_queue(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    platform: Platform,
    partitions: Sequence[str],
    lane: str,
    tags: Mapping[str, str] | None,
    certify: bool,
    asset_selection: Sequence[dg.AssetKey] | None,
    backfill_id: str | None = None,
) -> RunOutcome:
    """The team deployment's ``run_chain``: submit to the instance's run queue, wait, then certify.

    The queue's tag limits are then the one lane mechanism for every submitter
    on every machine (see ``ops/runs/queue.py``). The outcome is what
    ``run_chain`` returns in process, so commands print the same.
    """
    if asset_selection is None:
        require_daemon(instance)
        job = daily_sales_job if lane == CURRENT else backfill_sales_job
        run_id = launch_job_run(job.name, partitions, {LANE_TAG: lane, **(tags or {})})
        runs = [wait_for_run(instance, run_id)]
    else:
        require_daemon(instance, ("QUEUED_RUN_COORDINATOR", "BACKFILL"))
        keys = list(asset_selection or backfill_sales_job.selection.resolve(defs.resolve_asset_graph()))
        title = f"atlasmart: {partitions[0]}..{partitions[-1]}"
        backfill_id = backfill_id or queue_asset_backfill(
            defs, instance, partitions=partitions, asset_keys=keys, tags={LANE_TAG: BACKFILL, **(tags or {})},
            title=title, description=title)
        runs = wait_for_backfill(instance, backfill_id)
    success = bool(runs) and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    outcome = RunOutcome(
        run_id=runs[-1].run_id if runs else "",
        partitions=list(partitions),
        lane=lane,
        success=success,
        failures=[m for r in runs for m in failure_messages(run_events(instance, r.run_id))]
        or ([] if success else ["the backfill launched no run (see the backfill in the UI)"]),
        backfill_id=backfill_id if asset_selection is not None else None,
    )
    if certify:
        for run in runs:
            outcome.decisions += certify_run(platform, run.run_id, run.status == dg.DagsterRunStatus.SUCCESS,
                                             actor="atlasmart")
        report_day_states(instance, platform, partitions)
    return outcome


class LedgerProgress:
    """Reports a running run's progress from what its steps record in the ledger (a background thread)."""

    def __init__(self, platform: Platform, run_id: str, progress, interval: float = 0.5):
        self.platform, self.run_id, self.progress = platform, run_id, progress
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(interval,), daemon=True)
        self._thread.start()

    def _snapshot(self) -> tuple[str, int, int]:
        built = self.platform.ledger.partitions.of_run(self.run_id).events((BUILT,))
        if not built:
            return "starting", 0, 0
        rows = sum(e.detail.get("rows", 0) for e in built if e.asset == "raw_order_lines")
        latest = built[-1].asset
        return latest, len({e.partition for e in built if e.asset == latest}), rows

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            asset, partitions, rows = self._snapshot()
            self.progress.label = f"backfill [{asset}]"
            self.progress.update(partitions, rows)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        asset, partitions, rows = self._snapshot()
        self.progress.label = f"backfill [{asset}]"
        self.progress.done(rows)


def run_reference(defs: dg.Definitions, instance: dg.DagsterInstance, log_level: str | None = None) -> bool:
    job = defs.resolve_job_def("reference_job")
    return _execute(
        job, run_config=console_config(log_level), instance=instance, raise_on_error=False, tags=worker_tags()
    ).success


def run_golden_checks(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    platform: Platform,
    actor: str,
    log_level: str | None = None,
) -> tuple[dg.ExecuteInProcessResult, list[GateDecision]]:
    """Run the dashboards' golden cross-checks (``dashboard_checks_job``), then certify what they cleared."""
    job = defs.resolve_job_def("dashboard_checks_job")
    result = _execute(
        job, run_config=console_config(log_level), instance=instance, raise_on_error=False, tags=worker_tags()
    )
    decisions = certify_run(platform, result.run_id, result.success, actor=actor)
    return result, decisions


def run_checks(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    check_keys: Sequence[dg.AssetCheckKey],
    partition: str,
    lane: str = BACKFILL,
    tags: Mapping[str, str] | None = None,
    log_level: str | None = None,
) -> dg.ExecuteInProcessResult:
    """Execute only the given checks for one partition (nothing is materialized)."""
    job = defs.resolve_job_def((daily_sales_job if lane == CURRENT else backfill_sales_job).name)
    subset = job.get_subset(asset_selection=set(), asset_check_selection=set(check_keys))
    return _execute(
        subset,
        run_config=console_config(log_level),
        instance=instance,
        partition_key=partition,
        tags={LANE_TAG: lane, **worker_tags(), **(tags or {})},
        raise_on_error=False,
    )
