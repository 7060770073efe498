"""Certification holds: incident containment that stops certification of assets for a range of days."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Iterable, Sequence

from ..clock import format_ts
from .engine import LedgerEngine, LedgerTable

CERTIFICATION_HOLDS = LedgerTable(
    "certification_holds",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        action TEXT NOT NULL,
        hold_id INTEGER,
        assets_json TEXT,
        partition_from TEXT,
        partition_to TEXT,
        incident_id TEXT,
        actor TEXT NOT NULL,
        reason TEXT,
        at TEXT NOT NULL
    """,
)


def covering_hold(holds: Iterable[dict[str, Any]], asset: str, partition: str) -> dict[str, Any] | None:
    """The first of ``holds`` (see ``CertificationHolds.active``) that covers (asset, partition)."""
    for hold in holds:
        if asset in hold["assets"] and hold["partition_from"] <= partition <= hold["partition_to"]:
            return hold
    return None


class CertificationHolds:
    def __init__(self, engine: LedgerEngine):
        self.engine = engine

    def hold(
        self,
        assets: Sequence[str],
        partition_from: str,
        partition_to: str,
        actor: str,
        reason: str,
        at: datetime,
        incident_id: str | None = None,
    ) -> int:
        """Stop certification of ``assets`` for the partition range until released."""
        return self.engine.append(
            CERTIFICATION_HOLDS,
            {
                "action": "HOLD",
                "assets_json": json.dumps(sorted(assets)),
                "partition_from": partition_from,
                "partition_to": partition_to,
                "incident_id": incident_id,
                "actor": actor,
                "reason": reason,
                "at": format_ts(at),
            },
        )

    def release(self, hold_id: int, actor: str, reason: str, at: datetime) -> int:
        return self.engine.append(
            CERTIFICATION_HOLDS,
            {"action": "RELEASE", "hold_id": hold_id, "actor": actor, "reason": reason, "at": format_ts(at)},
        )

    def active(self) -> list[dict[str, Any]]:
        rows = self.engine.select(CERTIFICATION_HOLDS, order_by="id")
        released = {r["hold_id"] for r in rows if r["action"] == "RELEASE"}
        active = []
        for row in rows:
            if row["action"] == "HOLD" and row["id"] not in released:
                row["assets"] = json.loads(row.pop("assets_json"))
                active.append(row)
        return active

    def covering(self, asset: str, partition: str) -> dict[str, Any] | None:
        return covering_hold(self.active(), asset, partition)
