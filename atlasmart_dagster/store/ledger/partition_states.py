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
from functools import lru_cache
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


@lru_cache(maxsize=8192)
def _controls(text: str) -> ControlTuple:
    """The control tuple a ledger row's JSON holds: one frozen tuple per distinct text.

    A day's build, its certification and its three products carry the same
    figures, and reading a year of events built each one anew (validating
    every Decimal): the largest part of a ledger read.
    """
    return ControlTuple.from_mapping(loads(text))


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
            controls=_controls(row["controls_json"]) if row["controls_json"] else None,
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
    # re-certifies identical rows does not move it (see ``day_states``).
    certified_at: str = ""


class PartitionStates:
    """Append and read partition events (what they amount to is ``day_states.PartitionReads``)."""

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
