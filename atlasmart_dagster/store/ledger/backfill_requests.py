"""Backfill requests: who asked to rebuild which days, why, and how it ended (REQUESTED, SUBMITTED, FINISHED)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..clock import format_ts
from .engine import LedgerEngine, LedgerTable, dumps, loads

BACKFILL_REQUESTS = LedgerTable(
    "backfill_requests",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        request_id TEXT NOT NULL,
        event TEXT NOT NULL,
        partition_from TEXT NOT NULL,
        partition_to TEXT NOT NULL,
        start_at TEXT,
        operator TEXT NOT NULL,
        reason TEXT NOT NULL,
        incident_id TEXT,
        run_id TEXT,
        dagster_backfill_id TEXT,
        success INTEGER,
        detail_json TEXT,
        at TEXT NOT NULL
    """,
)


class BackfillRequests:
    def __init__(self, engine: LedgerEngine):
        self.engine = engine

    def record(self, request_id: str, event: str, request: dict, at: datetime, **outcome: Any) -> int:
        """Append one event (REQUESTED, SUBMITTED, FINISHED) of an operator's backfill request."""
        return self.engine.append(
            BACKFILL_REQUESTS,
            {
                "request_id": request_id,
                "event": event,
                "partition_from": request["start"],
                "partition_to": request["end"],
                "start_at": request.get("start_at"),
                "operator": request["operator"],
                "reason": request["reason"],
                "incident_id": request.get("incident_id"),
                "run_id": outcome.get("run_id"),
                "dagster_backfill_id": outcome.get("dagster_backfill_id"),
                "success": None if outcome.get("success") is None else int(outcome["success"]),
                "detail_json": dumps(outcome.get("detail")),
                "at": format_ts(at),
            },
        )

    def list(self) -> list[dict[str, Any]]:
        rows = self.engine.select(BACKFILL_REQUESTS)
        for row in rows:
            row["detail"] = loads(row.pop("detail_json"))
        return rows
