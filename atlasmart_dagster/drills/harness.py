"""The drill harness: a scratch AtlasMart world on logical time.

It owns a scratch folder (landing zone copied from the bundled sample, an
AtlasMart home, a Dagster instance) and offers the moves a drill makes: set
the clock, land or withhold a manifest, tick the schedule or the manifest
sensor, execute the run requests they return, certify as the sensor would,
and keep a timeline of signals. Evidence is written without anything that
changes between two executions of the same drill except Dagster run ids
(snapshot ids are replaced by stable labels).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import dagster as dg

from ..definitions import build_definitions
from ..defs.automation.schedules import scheduled_load
from ..defs.automation.sensors import plan_manifest_runs
from ..defs.checks.certification_checks import report_day_states
from ..defs.resources import AtlasmartResource
from ..ops.runs.chains import RunOutcome, run_chain
from ..product.lanes import LANE_TAG
from ..product.run_certification import certify_run
from ..store.clock import LogicalClock, format_ts, parse_ts
from ..store.instance.dagster_instance import prepare_dagster_home
from ..store.home import sample_dir
from ..store.platform import Platform


@dataclass
class Signal:
    at: str
    kind: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "kind": self.kind, "message": self.message, "data": self.data}


class DrillWorld:
    """A scratch home and landing zone driven on logical time."""

    def __init__(self, root: Path, ephemeral_instance: bool = False, log_level: str | None = "CRITICAL"):
        self.root = Path(root)
        if self.root.exists():
            shutil.rmtree(self.root)
        self.landing = self.root / "source" / "landing"
        shutil.copytree(sample_dir() / "landing", self.landing)
        shutil.copytree(sample_dir() / "reference", self.root / "source" / "reference")
        self.withheld = self.root / "source" / "withheld"
        self.withheld.mkdir(parents=True)
        self.home_dir = self.root / "home"
        self.reopen()
        if ephemeral_instance:
            self.instance = dg.DagsterInstance.ephemeral()
        else:
            self.instance = dg.DagsterInstance.from_config(str(prepare_dagster_home(self.platform.home)))
        self.log_level = log_level
        self.signals: list[Signal] = []
        self.runs: list[dict[str, Any]] = []

    def reopen(self) -> None:
        """Open the home's platform and definitions (anew after a restore swapped the files under them)."""
        # embedded: a rehearsal never writes into a team deployment's shared state.
        self.resource = AtlasmartResource(
            home=str(self.home_dir), landing=str(self.landing), clock="logical", embedded=True
        )
        self.platform: Platform = self.resource.platform
        self.clock = LogicalClock(self.platform.home.clock_file)
        self.defs = build_definitions(self.resource)

    # -- time and the ERP -------------------------------------------------
    def at(self, when: str, phases: dict[str, str] | None = None) -> datetime:
        self.clock.set(when, phases)
        return self.clock.now()

    @property
    def now(self) -> str:
        return format_ts(self.clock.now())

    def signal(self, kind: str, message: str, **data: Any) -> Signal:
        s = Signal(self.now, kind, message, data)
        self.signals.append(s)
        return s

    def day_dir(self, partition: str) -> Path:
        return self.platform.landing.folder(partition)

    def withhold_manifest(self, partition: str) -> None:
        """The ERP has written the data file but not the manifest yet."""
        self.platform.landing.manifest_path(partition).rename(self.withheld / f"{partition}.json")

    def land_manifest(self, partition: str, ready_at: str | None = None) -> dict:
        manifest = json.loads((self.withheld / f"{partition}.json").read_text())
        if ready_at:
            manifest["ready_at"] = ready_at  # the hash covers the data file only
        self.platform.landing.manifest_path(partition).write_text(json.dumps(manifest, indent=2))
        (self.withheld / f"{partition}.json").unlink()
        return manifest

    # -- automation -------------------------------------------------------
    def tick_schedule(self) -> dg.RunRequest | dg.SkipReason:
        return scheduled_load(self.platform, self.clock.now())

    def tick_sensor(self) -> tuple[list[dg.RunRequest], list[str]]:
        return plan_manifest_runs(self.platform)

    def load_from_sensor(
        self, label: str, partition: str, extra_tags: dict[str, str] | None = None
    ) -> tuple[dg.RunRequest, RunOutcome]:
        """Tick the manifest sensor and execute the one run it requests for ``partition``."""
        requests, _ = self.tick_sensor()
        (request,) = [r for r in requests if r.partition_key == partition]
        return request, self.execute(label, request, extra_tags)

    def execute(self, label: str, request: dg.RunRequest, extra_tags: dict[str, str] | None = None) -> RunOutcome:
        tags = {k: v for k, v in request.tags.items() if not k.startswith("dagster/")}
        tags.update(extra_tags or {})
        outcome = run_chain(
            self.defs,
            self.instance,
            self.platform,
            [request.partition_key],
            lane=tags[LANE_TAG],
            tags=tags,
            certify=False,
            log_level=self.log_level,
        )
        self.record_run(label, outcome)
        return outcome

    def run(self, label: str, partitions: list[str], lane: str, **kwargs: Any) -> RunOutcome:
        outcome = run_chain(self.defs, self.instance, self.platform, partitions, lane=lane, log_level=self.log_level, **kwargs)
        self.record_run(label, outcome)
        return outcome

    def certify(self, outcome: RunOutcome, actor: str = "certification_sensor"):
        decisions = certify_run(self.platform, outcome.run_id, outcome.success, actor=actor)
        report_day_states(self.instance, self.platform, outcome.partitions)
        outcome.decisions = decisions
        return decisions

    def record_run(self, label: str, outcome: RunOutcome) -> None:
        steps: dict[str, list[str]] = {}
        if outcome.result is not None:
            for event in outcome.result.all_events:
                if event.step_key:
                    steps.setdefault(event.step_key, []).append(event.event_type_value)
        self.runs.append(
            {
                "label": label,
                "run_id": outcome.run_id,
                "partitions": outcome.partitions,
                "lane": outcome.lane,
                "success": outcome.success,
                "failures": outcome.failures,
                "step_events": {k: v for k, v in sorted(steps.items())},
            }
        )

    # -- evidence ---------------------------------------------------------
    def ledger_excerpt(self, partitions: list[str]) -> dict[str, Any]:
        labels = SnapshotLabels()
        ledger = self.platform.ledger
        events = []
        for e in ledger.partitions.states(partitions).events():
            if e.partition in partitions:
                item = e.to_json()
                item["snapshot_id"] = labels.label(e.asset, e.snapshot_id)
                events.append(item)
        return {
            "partition_events": events,
            "check_results": [r for r in ledger.checks.results() if r["partition"] in partitions],
            "slo_records": [r for r in ledger.slos.records() if r["partition"] in partitions],
            "batches": [b for b in ledger.batches.list() if b["partition"] in partitions],
            "backfills": ledger.backfills.list(),
        }


class SnapshotLabels:
    """Stable names for Iceberg snapshot ids (which are random) in evidence."""

    def __init__(self) -> None:
        self._seen: dict[int, str] = {}
        self._counts: dict[str, int] = {}

    def label(self, asset: str, snapshot_id: int | None) -> str | None:
        if snapshot_id is None:
            return None
        if snapshot_id not in self._seen:
            self._counts[asset] = self._counts.get(asset, 0) + 1
            self._seen[snapshot_id] = f"{asset}@{self._counts[asset]}"
        return self._seen[snapshot_id]


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def hhmm(ts: str) -> str:
    return parse_ts(ts).strftime("%H:%M")

