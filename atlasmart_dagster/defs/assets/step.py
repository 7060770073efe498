"""What every asset step shares: its partitions, lane, clock, ledger records and logs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable

import dagster as dg

from ...domain.controls import ControlTuple
from ...product.lanes import lane_of
from ...store.ledger.partition_states import BUILT
from ...store.platform import Platform
from ..partitions import partition_keys_from_tags
from ..resources import AtlasmartResource

# How many failing partitions a check lists in its UI metadata (the ledger has all).
_MAX_LISTED = 20

# Called with every asset step as it starts, before it reads or writes
# anything. Empty in production: drills and tests register fault injectors
# here (``drills/faults.py``), so no asset body carries drill code.
STEP_START_HOOKS: list[Callable[["Step"], None]] = []


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

    def to_result(self) -> dg.AssetCheckResult:
        failing = [r for r in self.results if not r.passed]
        metadata: dict[str, Any] = {
            "rule": self.description,
            "partitions_checked": len(self.results),
            "partitions_failing": len(failing),
        }
        shown = failing[:_MAX_LISTED] if failing else self.results[:1]
        if len(self.results) == 1 or failing:
            metadata["observed_vs_expected"] = dg.MetadataValue.json(
                {r.partition: {"observed": r.observed, "expected": r.expected, "passed": r.passed} for r in shown}
            )
        metadata.update({k: dg.MetadataValue.json(v) if isinstance(v, (dict, list)) else v for k, v in self.summary.items()})
        if failing:
            metadata["failing_partitions"] = ", ".join(r.partition for r in failing[:_MAX_LISTED]) + (
                " …" if len(failing) > _MAX_LISTED else ""
            )
        return dg.AssetCheckResult(
            asset_key=dg.AssetKey(self.asset),
            check_name=self.name,
            passed=self.passed,
            severity=dg.AssetCheckSeverity.ERROR if self.blocking else dg.AssetCheckSeverity.WARN,
            metadata=metadata,
            description=self.description if self.passed else f"FAILED: {self.description}",
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
        retry = getattr(context, "retry_number", 0)
        if isinstance(context, dg.AssetExecutionContext):
            if retry:
                self.ledger.runs.record_retry(self.run_id, asset, retry + 1, self.now())
            for hook in STEP_START_HOOKS:
                hook(self)

    def _partitions(self) -> list[str]:
        if isinstance(self.context, dg.AssetExecutionContext):
            return list(self.context.partition_keys)
        # Checks are not partitioned (partitioned checks are a preview API and
        # lose the partition in range runs); the run's tags say what it covers.
        return partition_keys_from_tags(self.tags)

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
            built = self.ledger.partitions.events(asset="raw_order_lines", partition=partition, states=(BUILT,))
            self._batch_ids[partition] = built[-1].detail.get("batch_ids", []) if built else []
        return self._batch_ids[partition]

    def log_partition(self, partition: str, outcome: str, **fields: Any) -> None:
        """One structured line per partition (run id and step come from Dagster's log context)."""
        payload = {"event": "partition_processed", "asset": self.asset, "partition": partition, "lane": self.lane}
        if "batch_ids" not in fields:
            payload["batch_ids"] = self.batch_ids(partition)
        payload.update(fields)
        payload["outcome"] = outcome
        self.context.log.info(json.dumps(payload, sort_keys=False, default=str))

    def record_built(
        self,
        partition: str,
        snapshot_id: int,
        controls: ControlTuple | None = None,
        fingerprint: str | None = None,
        detail: dict | None = None,
    ) -> None:
        self.ledger.partitions.append(
            self.asset,
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

    def record_checks(self, outcomes: Iterable[CheckOutcome]) -> list[dg.AssetCheckResult]:
        """Write each partition's result to the ledger and return Dagster check results."""
        results = []
        at = self.now()
        with self.ledger.transaction():
            self._record_check_rows(outcomes, at)
        for outcome in outcomes:
            results.append(outcome.to_result())
        return results

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
