"""What every asset step shares: its partitions, lane, clock, ledger records and logs."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator, Mapping

import dagster as dg

from ...domain.controls import ControlTuple
from ...product.lanes import LANE_TAG, MANUAL, lane_of
from ...store.ledger.partition_states import BUILT
from ...store.instance.held_check_evaluations import coalesced_check_evaluations
from ...store.platform import Platform
from ..partitions import partition_keys_from_tags
from ..dagster_event_adapter import judging_each
from ..resources import AtlasmartResource
from ..tracing import StepTrace

# How many failing partitions a check lists in its UI metadata (the ledger has all).
_MAX_LISTED = 20
# More checks than a run ever plans.
_MAX_PLANNED = 10_000

# Called with every asset step as it starts, before it reads or writes
# anything. Empty in production: drills and tests register fault injectors
# here (``drills/faults.py``), so no asset body carries drill code.
STEP_START_HOOKS: list[Callable[["Step"], None]] = []
# Outcomes of a partition that are logged to runs.jsonl only, not to the run's Dagster log.
_QUIET_OUTCOMES = ("ok", "built")
# Runs whose lane tag this process already added (one write per run, not per step).
_STAMPED_RUNS: set[str] = set()


@dataclass(frozen=True)
class PartitionCheck:
    partition: str
    passed: bool
    observed: Any
    expected: Any


@dataclass
class CheckOutcome:
    """One check evaluated over the partitions of a run."""

    asset: str
    name: str
    blocking: bool
    description: str
    results: list[PartitionCheck] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)  # extra figures for the UI (e.g. totals)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def add(self, partition: str, passed: bool, observed: Any, expected: Any) -> None:
        self.results.append(PartitionCheck(partition, bool(passed), observed, expected))

    def _metadata(self, results: list[PartitionCheck]) -> dict[str, Any]:
        failing = [r for r in results if not r.passed]
        metadata: dict[str, Any] = {
            "rule": self.description,
            "partitions_checked": len(results),
            "partitions_failing": len(failing),
        }
        shown = failing[:_MAX_LISTED] if failing else results[:1]
        if len(results) == 1 or failing:
            metadata["observed_vs_expected"] = dg.MetadataValue.json(
                {r.partition: {"observed": r.observed, "expected": r.expected, "passed": r.passed} for r in shown}
            )
        metadata.update({k: dg.MetadataValue.json(v) if isinstance(v, (dict, list)) else v for k, v in self.summary.items()})
        if failing:
            metadata["failing_partitions"] = ", ".join(r.partition for r in failing[:_MAX_LISTED]) + (
                " …" if len(failing) > _MAX_LISTED else ""
            )
        return metadata

    @property
    def severity(self) -> dg.AssetCheckSeverity:
        return dg.AssetCheckSeverity.ERROR if self.blocking else dg.AssetCheckSeverity.WARN

    def _description(self, passed: bool) -> str:
        return self.description if passed else f"FAILED: {self.description}"

    def to_result(self) -> dg.AssetCheckResult:
        """One result for the whole run (checks of unpartitioned assets)."""
        return dg.AssetCheckResult(
            asset_key=dg.AssetKey(self.asset),
            check_name=self.name,
            passed=self.passed,
            severity=self.severity,
            metadata=self._metadata(self.results),
            description=self._description(self.passed),
        )

    def to_evaluations(self, per_partition: bool = True) -> list[dg.AssetCheckEvaluation]:
        """One evaluation per partition, with Dagster's ``partition`` set; or one for the run (``per_partition=False``)."""
        if not per_partition:
            return [self._evaluation(self.passed, self._metadata(self.results), None)]
        return [self._evaluation(r.passed, {"partition": r.partition, **self._metadata([r])}, r.partition) for r in self.results]

    def _evaluation(self, passed: bool, metadata: dict[str, Any], partition: str | None) -> dg.AssetCheckEvaluation:
        return dg.AssetCheckEvaluation(
            asset_key=dg.AssetKey(self.asset),
            check_name=self.name,
            passed=passed,
            severity=self.severity,
            metadata=metadata,
            description=self._description(passed),
            blocking=self.blocking,
            partition=partition,
        )


def partitioned_check_events(
    instance: dg.DagsterInstance,
    output_names: Mapping[dg.AssetCheckKey, str],
    selected: Iterable[dg.AssetCheckKey],
    evaluations: Iterable[dg.AssetCheckEvaluation],
) -> Iterator[dg.Output | dg.AssetCheckEvaluation]:
    """What a step yields to report its checks with one evaluation per partition.

    An ``AssetCheckResult`` carries no partition, and Dagster records it
    without one, while it planned each check once per partition of the run:
    every planned partition would stay "Skipped" in the check's history. So
    the step yields each selected check's output (what an ``AssetCheckResult``
    yields for it) and then its per-partition evaluations, which complete the
    planned rows. A failed evaluation of a blocking check with ERROR severity
    fails the step after all its events, as a failed ``AssetCheckResult`` does.

    Each evaluation names the materialization it judges, the day's newest
    (yield them after the step's materializations), as an ``AssetCheckResult``
    would: the check's *Partitions* tab counts a day only then, and read every
    day *Missing* ("Passed (0)") without it (``dagster_event_adapter.py``).
    """
    by_key: dict[dg.AssetCheckKey, list[dg.AssetCheckEvaluation]] = {}
    for evaluation in judging_each(instance, list(evaluations)):
        by_key.setdefault(evaluation.asset_check_key, []).append(evaluation)
    for key in sorted(selected, key=lambda k: (k.asset_key.to_user_string(), k.name)):
        yield dg.Output(None, output_name=output_names[key])
        yield from by_key.get(key, [])


def at_partition(evaluation: dg.AssetCheckEvaluation, partition: str | None) -> dg.AssetCheckEvaluation:
    """The same evaluation written for ``partition`` (Dagster's ``partition`` field)."""
    return dg.AssetCheckEvaluation(
        asset_key=evaluation.asset_key, check_name=evaluation.check_name, passed=evaluation.passed,
        metadata=evaluation.metadata, severity=evaluation.severity, description=evaluation.description,
        blocking=evaluation.blocking, partition=partition,
    )


def run_check_results(
    selected: Iterable[dg.AssetCheckKey], evaluations: Iterable[dg.AssetCheckEvaluation]
) -> Iterator[dg.AssetCheckResult]:
    """The selected checks' evaluations as ``AssetCheckResult``s, for a run with no partition.

    Dagster then records which materialization each one read against, so the
    UI shows it against the asset's newest materialization until a newer one.
    """
    wanted = set(selected)
    for e in evaluations:
        if e.asset_check_key in wanted:
            yield dg.AssetCheckResult(asset_key=e.asset_key, check_name=e.check_name, passed=e.passed,
                                      severity=e.severity, metadata=e.metadata, description=e.description)


def run_wide_check_events(
    context: dg.AssetCheckExecutionContext,
    output_names: Mapping[dg.AssetCheckKey, str],
    evaluations: Iterable[dg.AssetCheckEvaluation],
) -> Iterator[dg.Output | dg.AssetCheckEvaluation | dg.AssetCheckResult]:
    """What a step yields for checks whose one evaluation states a whole asset, in any run.

    Dagster 1.13 plans an unpartitioned check in a partitioned run once per
    partition of the run (selecting a served asset's checks with a partition
    or range), and an ``AssetCheckResult`` completes none of those rows: each
    read "Skipped" and an extra unpartitioned row was added beside them. So
    the evaluation is written for each partition of the run, or, when the
    run has none (*Execute all*), once as an ``AssetCheckResult``.
    """
    partitions = partition_keys_from_tags(dict(context.run.tags))
    if not partitions:
        yield from run_check_results(context.selected_asset_check_keys, evaluations)
        return
    yield from partitioned_check_events(
        context.instance, output_names, context.selected_asset_check_keys,
        [at_partition(e, p) for e in evaluations for p in partitions],
    )


class Step:
    """The execution of one asset (or check) over the partitions of a run."""

    def __init__(
        self,
        context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext,
        resource: AtlasmartResource,
        asset: str,
    ):
        self.context = context
        self.platform: Platform = resource.platform
        self.asset = asset
        self.tags = dict(context.run.tags)
        self.run_id = context.run.run_id
        self.lane = lane_of(self.tags, self.platform.clock.now())
        self.partitions = self._partitions()
        self._batch_ids: dict[str, list[str]] = {}
        self._handlers: list[logging.Handler] | None = None
        # Before the start hooks: a step a fault injector stops still has its span.
        self.trace = StepTrace(context, asset, self.lane, self.partitions, self._batch_ids.get)
        retry = getattr(context, "retry_number", 0)
        if isinstance(context, dg.AssetExecutionContext):
            # First, before any store is read: counted even while the storage it retries is down, and the
            # retries an outage of the ledger database kept waiting are written once it is back.
            if retry:
                self.platform.record_step_retry(self.run_id, asset, retry + 1, self.now())
            else:
                self.platform.flush_step_retries()
            self._stamp_lane()
            for hook in STEP_START_HOOKS:
                hook(self)

    def _stamp_lane(self) -> None:
        """Tag the run with its lane if nothing did (runs executed in their launching process).

        Queued runs are stamped by the run coordinator (``ops/runs/lane_coordinator.py``);
        ``dagster asset materialize`` and ``atlasmart`` runs never pass one, so
        their first step does it, once per run and process.
        """
        if LANE_TAG in self.tags or self.lane == MANUAL or self.run_id in _STAMPED_RUNS:
            return
        self.context.instance.add_run_tags(self.run_id, {LANE_TAG: self.lane})
        _STAMPED_RUNS.add(self.run_id)

    def _partitions(self) -> list[str]:
        if isinstance(self.context, dg.AssetExecutionContext):
            return list(self.context.partition_keys)
        # Checks are not partitioned (partitioned checks are a preview API and
        # lose the partition in range runs); the run's tags say what it covers.
        return partition_keys_from_tags(self.tags)

    @property
    def builds(self) -> bool:
        """Whether the step materializes its asset (not when only the asset's checks were selected)."""
        return dg.AssetKey(self.asset) in self.context.selected_asset_keys

    def runs_check(self, name: str) -> bool:
        """Whether the step evaluates the asset's check ``name`` (it may be left out of the selection)."""
        return dg.AssetCheckKey(dg.AssetKey(self.asset), name) in self.context.selected_asset_check_keys

    @property
    def ledger(self):
        return self.platform.ledger

    @property
    def warehouse(self):
        return self.platform.warehouse

    def now(self, phase: str | None = None) -> datetime:
        return self.platform.clock.now(phase)

    def snapshot_properties(self) -> dict[str, str]:
        return {"run_id": self.run_id, "lane": self.lane, "asset": self.asset}

    def batch_ids(self, partition: str) -> list[str]:
        """The batches the day's data came from (as of its latest raw build)."""
        if partition not in self._batch_ids:
            built = self.ledger.partitions.states([partition], ["raw_order_lines"]).get("raw_order_lines", partition).builds
            self._batch_ids[partition] = built[-1].detail.get("batch_ids", []) if built else []
        return self._batch_ids[partition]

    def log_partition(self, partition: str, outcome: str, **fields: Any) -> None:
        """One structured line per partition (run id and step come from Dagster's log context).

        Every line goes to the instance's log handlers (``runs.jsonl``). Only a
        partition that needs attention (not ``ok``/``built``) is also a line of
        the run's Dagster log: a line there is an event written to the
        instance, and one per asset and day made the run log, not the data, the
        cost of a range run. The figures of every day are in its
        materialization metadata.
        """
        payload = {"event": "partition_processed", "asset": self.asset, "partition": partition, "lane": self.lane}
        if "batch_ids" not in fields:
            payload["batch_ids"] = self.batch_ids(partition)
        payload.update(fields)
        payload["outcome"] = outcome
        self.trace.logged(partition, outcome, payload)
        message = json.dumps(payload, sort_keys=False, default=str)
        if outcome not in _QUIET_OUTCOMES:
            self.context.log.info(message)  # reaches the log handlers too
            return
        record = logging.LogRecord("dagster", logging.INFO, __file__, 0, message, None, None)
        record.dagster_meta = {"run_id": self.run_id, "job_name": self.context.run.job_name,
                               "step_key": self.context.op_execution_context.op_def.name, "job_tags": self.tags,
                               "orig_message": message}
        for handler in self._log_handlers():
            if record.levelno >= handler.level:
                handler.handle(record)

    def _log_handlers(self) -> list[logging.Handler]:
        """The log handlers the instance's dagster.yaml configures (``python_logs``), without its event log."""
        if self._handlers is None:
            self._handlers = list(self.context.instance.get_yaml_python_handlers())
        return self._handlers

    def record_built(
        self,
        partition: str,
        snapshot_id: int,
        controls: ControlTuple | None = None,
        fingerprint: str | None = None,
        detail: dict | None = None,
        asset: str | None = None,
    ) -> None:
        """BUILT for ``partition`` of this step's asset (or of ``asset``, another table the step writes)."""
        self.ledger.partitions.append(
            asset or self.asset,
            partition,
            BUILT,
            self.now(),
            actor=f"run:{self.run_id}",
            snapshot_id=snapshot_id,
            fingerprint=fingerprint,
            controls=controls,
            run_id=self.run_id,
            lane=self.lane,
            detail=detail,
        )
        if asset in (None, self.asset):  # the partition's span shows its own asset's build, not a side table's
            self.trace.built(partition, snapshot_id, controls, detail)

    def record_checks(self, outcomes: Iterable[CheckOutcome]) -> list[dg.AssetCheckResult]:
        """Write each partition's result to the ledger and return one Dagster check result per check."""
        outcomes = list(outcomes)
        with self.ledger.transaction():
            self._record_check_rows(outcomes, self.now())
        self.trace.checks(outcomes)
        return [outcome.to_result() for outcome in outcomes]

    def report_checks(self, outcomes: Iterable[CheckOutcome]) -> Iterator[dg.Output | dg.AssetCheckEvaluation]:
        """Write each partition's result to the ledger and yield the checks' per-partition evaluations.

        Yield these after the step's materializations: a failed blocking check
        then fails the step once its data is published, and nothing downstream
        builds.
        """
        selected = self.context.selected_asset_check_keys
        outcomes = [o for o in outcomes if dg.AssetCheckKey(dg.AssetKey(o.asset), o.name) in selected]
        with self.ledger.transaction():
            self._record_check_rows(outcomes, self.now())
        self.trace.checks(outcomes)
        unpartitioned = self._checks_planned_unpartitioned()
        evaluations = [
            e
            for outcome in outcomes
            for e in outcome.to_evaluations(per_partition=(outcome.asset, outcome.name) not in unpartitioned)
        ]
        # One write for the step's evaluations, not three transactions each (a range reports hundreds).
        with coalesced_check_evaluations(self.context.instance):
            yield from partitioned_check_events(self.context.instance, self.check_output_names(), selected, evaluations)

    def _checks_planned_unpartitioned(self) -> set[tuple[str, str]]:
        """The checks Dagster planned once for the whole run rather than per partition.

        A run that materializes the asset plans its checks per partition; a run
        of checks alone (nothing materialized) plans them once, without a
        partition. Each check is reported the way it was planned, so every
        planned row gets its result.
        """
        planned = self.context.instance.get_records_for_run(
            self.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED, limit=_MAX_PLANNED
        ).records
        return {
            (data.asset_key.to_user_string(), data.check_name)
            for data in (r.event_log_entry.dagster_event.asset_check_planned_data for r in planned)
            if data.partitions_subset is None
        }

    def check_output_names(self) -> dict[dg.AssetCheckKey, str]:
        """The output of this step's definition that stands for each of its checks."""
        context = self.context
        assets_def = context.assets_def if isinstance(context, dg.AssetExecutionContext) else context.op_execution_context.assets_def
        return {spec.key: name for name, spec in assets_def.check_specs_by_output_name.items()}

    def _record_check_rows(self, outcomes, at) -> None:
        for outcome in outcomes:
            for r in outcome.results:
                self.ledger.checks.record(
                    outcome.asset,
                    outcome.name,
                    r.partition,
                    r.passed,
                    outcome.blocking,
                    at,
                    self.run_id,
                    observed=r.observed,
                    expected=r.expected,
                )

    def add_partition_metadata(self, per_partition: dict[str, dict[str, Any]], asset_key: str | None = None) -> None:
        """Per-partition materialization metadata (each partition's event gets its own figures)."""
        if not isinstance(self.context, dg.AssetExecutionContext):
            return
        for partition, metadata in per_partition.items():
            if asset_key is None:
                self.context.add_asset_metadata(metadata, partition_key=partition)
            else:
                self.context.add_asset_metadata(metadata, asset_key=asset_key, partition_key=partition)
