"""What consumers see: certified versions only, and a plain state per partition.

Consumers never read a table's current snapshot. For each partition they read
the newest certification that was not withdrawn, at its pinned Iceberg
snapshot. A partition that was never certified is *absent* (not zeros), and
its state says why: delayed, blocked upstream, withdrawn.

Partition states, worst first:

``WITHDRAWN``            certification withdrawn; serving an older version if any
``DELAYED``              due and not certified (e.g. the source is not ready, or
                         its owner rejected a held delivery)
``ANOMALY_HELD``         never certified: the day is far from its history and
                         waits for its data owner (nothing new is served)
``RESTATEMENT_HELD``     certified; a re-send beyond tolerance waits for its owner
``RESTATEMENT_PENDING``  certified, but newer source data is waiting to be rebuilt
``CERTIFIED``            every certified product of the day is served
``PENDING``              not due yet and not certified
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

import duckdb
import pyarrow as pa

from ..store.clock import format_ts
from ..store.ledger.day_states import AssetDay, DayStates
from ..store.ledger.partition_states import (
    BLOCKED_UPSTREAM,
    CERTIFIED,
    RESTATEMENT_PENDING,
    WITHDRAWN,
    ServedVersion,
)
from ..store.platform import Platform
from ..store.tables import CERTIFIED_ASSETS, RAW_ORDER_LINES, TABLES_BY_NAME
from ..store.warehouse import duckdb_connection
from .anomaly import ANOMALY_HELD, anomaly_reasons
from .certified_branch import Target, branch_agrees, served_index
from .restatements import held_reasons
from .slo import SloResult, due_at, latest_results

HELD = "RESTATEMENT_HELD"
ANOMALY = "ANOMALY_HELD"


@dataclass
class AssetState:
    asset: str
    served: ServedVersion | None
    withdrawn: bool
    restatement_pending: bool

    def to_json(self) -> dict[str, Any]:
        cert = self.served.certification if self.served else None
        return {
            "asset": self.asset,
            "served_version": self.served.version if self.served else None,
            "snapshot_id": cert.snapshot_id if cert else None,
            "fingerprint": cert.fingerprint if cert else None,
            "certified_at": self.served.certified_at if self.served else None,
            "controls": cert.controls.to_json() if cert and cert.controls else None,
            "withdrawn": self.withdrawn,
            "restatement_pending": self.restatement_pending,
        }


@dataclass
class PartitionStatus:
    partition: str
    state: str
    detail: str
    assets: list[AssetState] = field(default_factory=list)
    slo: list[SloResult] = field(default_factory=list)
    # Earlier certified versions of a restated day, oldest first: what consumers were given before.
    previous: list[ServedVersion] = field(default_factory=list)

    @property
    def restated_from(self) -> str | None:
        """``revenue 395.00 -> 320.00; paid lines 4 -> 3`` against the version served before this one."""
        served = [a.served for a in self.assets if a.served]
        if not self.previous or not served or served[0].certification.controls is None:
            return None
        before, now = self.previous[-1].certification.controls, served[0].certification.controls
        if before is None:
            return None
        changes = [f"{name.replace('_usd', '').replace('_', ' ')} {d['expected']} -> {d['observed']}"
                   for name, d in now.differences(before).items()]
        return f"restated from version {self.previous[-1].version}: " + ("; ".join(changes) or "same figures")

    @property
    def slo_summary(self) -> str:
        if not self.slo:
            return "-"
        missed = [r for r in self.slo if not r.met]
        if not missed:
            return "met (" + ", ".join(f"{r.objective} {r.value_text}" for r in self.slo) + ")"
        return "; ".join(r.describe() for r in missed)

    @property
    def certified_version(self) -> int | None:
        versions = [a.served.version for a in self.assets if a.served]
        return max(versions) if versions and len(versions) == len(self.assets) else None

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "state": self.state,
            "detail": self.detail,
            "certified_version": self.certified_version,
            "assets": [a.to_json() for a in self.assets],
            "slo": [r.to_json() for r in self.slo],
            "previous_versions": [
                {"version": v.version, "certified_at": v.certified_at, "snapshot_id": v.certification.snapshot_id,
                 "fingerprint": v.certification.fingerprint,
                 "controls": v.certification.controls.to_json() if v.certification.controls else None}
                for v in self.previous
            ],
            "restated_from": self.restated_from,
        }


def _asset_state(day: AssetDay) -> AssetState:
    return AssetState(day.asset, day.served, day.withdrawn, day.restatement_pending)


def partition_status(platform: Platform, partition: str, now: datetime | None = None) -> PartitionStatus:
    """The consumer-visible state of one partition, with its recorded SLO results."""
    return partition_statuses(platform, [partition], now)[0]


def partition_statuses(
    platform: Platform, partitions: Sequence[str], now: datetime | None = None, states: DayStates | None = None
) -> list[PartitionStatus]:
    """``partition_status`` of many partitions, from one read of the ledger (``states``, read here when None)."""
    now = now or platform.clock.now()
    states = states if states is not None else platform.ledger.partitions.states(partitions)
    held = held_reasons(platform, partitions, states=states)
    anomalies = anomaly_reasons(platform, partitions, states=states)
    statuses = []
    for partition in partitions:
        status = _state(states, partition, now, held.get(partition), anomalies.get(partition))
        status.slo = latest_results(platform.ledger, partition)
        # Versions of the governed metric: every certified product of a day carries the same controls.
        metric = states.get(CERTIFIED_ASSETS[0], partition)
        if metric.served is not None:
            status.previous = [v for v in metric.versions if v.version < metric.served.version]
            if status.previous and status.state in (CERTIFIED, HELD, RESTATEMENT_PENDING):
                status.detail += f"; {status.restated_from}"
        statuses.append(status)
    return statuses


def _state(states: DayStates, partition: str, now: datetime, held: str | None, anomaly: str | None = None) -> PartitionStatus:
    assets = [_asset_state(states.get(asset, partition)) for asset in CERTIFIED_ASSETS]
    served = [a for a in assets if a.served]
    if any(a.withdrawn for a in assets):
        detail = "certification withdrawn; " + (
            f"serving certified version {min(a.served.version for a in served)}" if served else "nothing is served"
        )
        return PartitionStatus(partition, WITHDRAWN, detail, assets)
    if len(served) == len(assets):
        version = max(a.served.version for a in served)
        at = max(a.served.certified_at for a in served)
        if held:
            return PartitionStatus(partition, HELD, f"serving certified version {version}; {held}", assets)
        if any(a.restatement_pending for a in assets):
            return PartitionStatus(
                partition, RESTATEMENT_PENDING, f"serving certified version {version}; newer source data is being rebuilt", assets
            )
        restated = " (restated)" if version > 1 else ""
        return PartitionStatus(partition, CERTIFIED, f"version {version}{restated}, certified {at}", assets)
    if anomaly and anomaly.startswith(ANOMALY_HELD):
        return PartitionStatus(partition, ANOMALY, f"nothing new is served; {anomaly}", assets)
    blocked = states.get(RAW_ORDER_LINES.name, partition).blocked
    due = due_at(partition)
    if anomaly:  # rejected by its owner: waiting for a corrected delivery
        return PartitionStatus(partition, "DELAYED", f"{anomaly}; waiting for a corrected delivery", assets)
    if blocked:
        problems = "; ".join(blocked[-1].detail.get("problems", []))
        return PartitionStatus(partition, "DELAYED", f"blocked upstream at {blocked[-1].recorded_at}: {problems}", assets)
    if now >= due:
        late = int((now - due).total_seconds() // 60)
        return PartitionStatus(partition, "DELAYED", f"due {format_ts(due)}, not certified ({late} min late)", assets)
    return PartitionStatus(partition, "PENDING", f"due {format_ts(due)}", assets)


def known_partitions(platform: Platform, states: DayStates | None = None) -> list[str]:
    """Partitions the platform has heard of: landed, loaded, blocked or certified."""
    states = states if states is not None else platform.ledger.partitions.states()
    seen = set(platform.landing.partitions())
    seen.update(b["partition"] for b in platform.ledger.batches.list())
    seen.update(states.days((CERTIFIED, BLOCKED_UPSTREAM, WITHDRAWN)))
    return sorted(seen)


def _read_days_at(platform: Platform, spec, by_snapshot: dict[int, list[str]]) -> pa.Table:
    """The rows of ``spec``, each group of days read at its snapshot, in grain order."""
    con = duckdb_connection()
    try:
        parts = [spec.conform(con.sql(platform.warehouse.relation_sql(spec, sorted(days), snapshot_id)).to_arrow_table())
                 for snapshot_id, days in sorted(by_snapshot.items())]
    finally:
        con.close()
    if not parts:
        return spec.arrow_schema().empty_table()
    return pa.concat_tables(parts).sort_by([(c, "ascending") for c in spec.grain])


def _read_served(platform: Platform, target: Target, by_snapshot: dict[int, list[str]], states: DayStates) -> pa.Table:
    """The served days of ``by_snapshot``: from the ``certified`` branch when it holds exactly them, else each
    group of days at its own snapshot (a branch behind the ledger is never read)."""
    days = sorted(d for group in by_snapshot.values() for d in group)
    readable = days and None not in by_snapshot  # a certification that names no snapshot is not on the branch
    head = branch_agrees(platform, target.spec, served_index(states, target), days) if readable else None
    return _read_days_at(platform, target.spec, {head: days} if head is not None else by_snapshot)


def read_certified(
    platform: Platform, asset: str, partitions: Sequence[str] | None = None, states: DayStates | None = None
) -> pa.Table:
    """Rows of ``asset`` as consumers see them: each partition at its served certified snapshot.

    Read from the ``certified`` branch (one scan plan) when its index is the
    served state of those days, which is what any other engine reads too.
    """
    states = states if states is not None else platform.ledger.partitions.states(partitions, [asset])
    served = states.served_map(asset)
    by_snapshot: dict[int, list[str]] = {}
    for partition, version in served.items():
        if partitions is None or partition in partitions:
            by_snapshot.setdefault(version.certification.snapshot_id, []).append(partition)
    return _read_served(platform, Target(TABLES_BY_NAME[asset], asset), by_snapshot, states)


def read_certified_through(platform: Platform, relation: str, product: str, states: DayStates | None = None) -> pa.Table:
    """Rows of ``relation`` as certified through ``product``: each day at the snapshot that the
    product's served certification reconciled against; a day whose product is not served is absent.

    The certification gate pins, for each certified product, the newest build of
    the chain below it up to the product's own build; that build is read here
    (and ``maintenance`` keeps its snapshot), from the ``certified`` branch when
    it was published through the same product and holds exactly those days.
    """
    states = states if states is not None else platform.ledger.partitions.states(None, [relation, product])
    by_snapshot: dict[int, list[str]] = {}
    for day, served in states.served_map(product).items():
        pinned = states.pinned_build(relation, served.certification)
        if pinned is not None and pinned.snapshot_id is not None:
            by_snapshot.setdefault(pinned.snapshot_id, []).append(day)
    return _read_served(platform, Target(TABLES_BY_NAME[relation], product), by_snapshot, states)


def register_certified(con: duckdb.DuckDBPyConnection, platform: Platform) -> None:
    """Register each certified asset's served version on ``con`` as a relation of the same name.

    Dashboards, golden checks and the query gateway read through here, so no
    consumer ever sees an uncertified or withdrawn version.
    """
    states = platform.ledger.partitions.states(None, CERTIFIED_ASSETS)
    for name in CERTIFIED_ASSETS:
        con.register(name, read_certified(platform, name, states=states))
