"""Partition states: the ledger's record of what each (asset, partition) went through, and what is served.

States (``partition_events.state``):

``BUILT``                  checks passed in a run; a candidate awaiting certification
``CERTIFIED``              consumers may read this snapshot of the partition
``CERTIFICATION_REFUSED``  the gate refused a candidate (its reasons are recorded)
``WITHDRAWN``              a certification was withdrawn (consumers fall back)
``BLOCKED_UPSTREAM``       a run found the source not ready and published nothing
``RESTATEMENT_PENDING``    a certified day has new source data waiting to be rebuilt
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

from ...domain.controls import ControlTuple
from ..clock import format_ts
from .engine import LedgerEngine, LedgerTable, dumps, loads, where_clause

BUILT = "BUILT"
CERTIFIED = "CERTIFIED"
CERTIFICATION_REFUSED = "CERTIFICATION_REFUSED"
WITHDRAWN = "WITHDRAWN"
BLOCKED_UPSTREAM = "BLOCKED_UPSTREAM"
RESTATEMENT_PENDING = "RESTATEMENT_PENDING"

PARTITION_EVENTS = LedgerTable(
    "partition_events",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        asset TEXT NOT NULL,
        partition TEXT NOT NULL,
        state TEXT NOT NULL,
        snapshot_id INTEGER,
        fingerprint TEXT,
        controls_json TEXT,
        run_id TEXT,
        lane TEXT,
        actor TEXT NOT NULL,
        reason TEXT,
        detail_json TEXT,
        recorded_at TEXT NOT NULL
    """,
    indexes=(
        "ix_events_asset_partition ON partition_events(asset, partition, id)",
        "ix_events_run ON partition_events(run_id)",
    ),
)


@dataclass(frozen=True)
class PartitionEvent:
    id: int
    asset: str
    partition: str
    state: str
    snapshot_id: int | None
    fingerprint: str | None
    controls: ControlTuple | None
    run_id: str | None
    lane: str | None
    actor: str
    reason: str | None
    detail: dict
    recorded_at: str

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "PartitionEvent":
        return cls(
            id=row["id"],
            asset=row["asset"],
            partition=row["partition"],
            state=row["state"],
            snapshot_id=row["snapshot_id"],
            fingerprint=row["fingerprint"],
            controls=ControlTuple.from_mapping(loads(row["controls_json"])) if row["controls_json"] else None,
            run_id=row["run_id"],
            lane=row["lane"],
            actor=row["actor"],
            reason=row["reason"],
            detail=loads(row["detail_json"], {}),
            recorded_at=row["recorded_at"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "asset": self.asset,
            "partition": self.partition,
            "state": self.state,
            "snapshot_id": self.snapshot_id,
            "fingerprint": self.fingerprint,
            "controls": self.controls.to_json() if self.controls else None,
            "run_id": self.run_id,
            "lane": self.lane,
            "actor": self.actor,
            "reason": self.reason,
            "detail": self.detail,
            "recorded_at": self.recorded_at,
        }


@dataclass(frozen=True)
class ServedVersion:
    """The certification consumers are served for one (asset, partition)."""

    certification: PartitionEvent
    version: int  # 1 for the first certified content of the partition, 2 after a restatement, ...
    # When consumers were first served this content: a reload or replay that
    # re-certifies identical rows does not move it (see ``_first_served_at``).
    certified_at: str = ""


def _content_version(history: list[PartitionEvent], target: PartitionEvent) -> int:
    """1 + the number of times the certified content changed up to ``target``.

    Re-certifying identical rows (same fingerprint) is not a new version: a
    replay must not look like a restatement to consumers.
    """
    version, previous = 0, None
    for event in history:
        if event.fingerprint != previous:
            version += 1
            previous = event.fingerprint
        if event.id == target.id:
            return version
    return version


def _first_served_at(history: list[PartitionEvent], newest: PartitionEvent, withdrawn: set[int]) -> str:
    """When the content of ``newest`` started being served without a break.

    Walks back over certifications of the same fingerprint; a withdrawn one, or
    another content in between, is a break (what follows it was delivered anew).
    """
    at = newest.recorded_at
    for event in reversed(history[: history.index(newest)]):
        if event.id in withdrawn or event.fingerprint != newest.fingerprint:
            break
        at = event.recorded_at
    return at


class PartitionStates:
    """Append and read partition events; derive the served version of each partition."""

    def __init__(self, engine: LedgerEngine):
        self.engine = engine

    def append(
        self,
        asset: str,
        partition: str,
        state: str,
        at: datetime,
        actor: str,
        *,
        snapshot_id: int | None = None,
        fingerprint: str | None = None,
        controls: ControlTuple | None = None,
        run_id: str | None = None,
        lane: str | None = None,
        reason: str | None = None,
        detail: dict | None = None,
    ) -> int:
        return self.engine.append(
            PARTITION_EVENTS,
            {
                "asset": asset,
                "partition": partition,
                "state": state,
                "snapshot_id": snapshot_id,
                "fingerprint": fingerprint,
                "controls_json": dumps(controls.to_json()) if controls else None,
                "run_id": run_id,
                "lane": lane,
                "actor": actor,
                "reason": reason,
                "detail_json": dumps(detail),
                "recorded_at": format_ts(at),
            },
        )

    def events(
        self,
        asset: str | None = None,
        partition: str | None = None,
        states: Iterable[str] | None = None,
        run_id: str | None = None,
        assets: Iterable[str] | None = None,
        partitions: Iterable[str] | None = None,
    ) -> list[PartitionEvent]:
        where, args = where_clause(
            {"asset": asset, "partition": partition, "run_id": run_id},
            {"state": states, "asset": assets, "partition": partitions},
        )
        return [PartitionEvent.from_row(r) for r in self.engine.select(PARTITION_EVENTS, where, args, order_by="id")]

    def served(self, asset: str, partition: str) -> ServedVersion | None:
        """The newest certification of (asset, partition) that was not withdrawn."""
        return self.served_map(asset).get(partition)

    def versions_map(self, asset: str, partitions: Iterable[str] | None = None) -> dict[str, list[ServedVersion]]:
        """Every content version ever certified per partition of ``asset``, oldest first.

        Each entry is the newest certification of that content (its snapshot
        holds the rows), with the time consumers were first given it. A
        restated day keeps its earlier versions here, withdrawn or not: a
        consumer who exported version 1 can still read what it said.
        """
        certs: dict[str, list[PartitionEvent]] = {}
        for event in self.events(asset=asset, states=(CERTIFIED,), partitions=partitions):
            certs.setdefault(event.partition, []).append(event)
        found: dict[str, list[ServedVersion]] = {}
        for partition, history in certs.items():
            versions: list[ServedVersion] = []
            previous = None
            for event in history:
                if event.fingerprint != previous:
                    versions.append(ServedVersion(event, version=len(versions) + 1, certified_at=event.recorded_at))
                    previous = event.fingerprint
                else:
                    versions[-1] = ServedVersion(event, version=versions[-1].version,
                                                 certified_at=versions[-1].certified_at)
            found[partition] = versions
        return found

    def served_map(self, asset: str) -> dict[str, ServedVersion]:
        """Served certification per partition of ``asset``."""
        served: dict[str, ServedVersion] = {}
        certs: dict[str, list[PartitionEvent]] = {}
        withdrawn: set[int] = set()
        for event in self.events(asset=asset, states=(CERTIFIED, WITHDRAWN)):
            if event.state == CERTIFIED:
                certs.setdefault(event.partition, []).append(event)
            else:
                withdrawn.update(event.detail.get("certification_ids", []))
        for partition, history in certs.items():
            live = [e for e in history if e.id not in withdrawn]
            if live:
                newest = live[-1]
                served[partition] = ServedVersion(
                    newest, version=_content_version(history, newest),
                    certified_at=_first_served_at(history, newest, withdrawn),
                )
        return served
