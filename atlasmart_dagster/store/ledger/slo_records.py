"""SLO records: each day's measured objectives (freshness, completeness, duration, availability)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ..clock import format_ts
from .engine import LedgerEngine, LedgerTable

SLO_RECORDS = LedgerTable(
    "slo_records",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        partition TEXT NOT NULL,
        objective TEXT NOT NULL,
        value REAL,
        unit TEXT NOT NULL,
        target REAL NOT NULL,
        met INTEGER NOT NULL,
        missed_by REAL,
        detail TEXT,
        run_id TEXT,
        timeline_json TEXT,
        recorded_at TEXT NOT NULL
    """,
)


class SloRecords:
    def __init__(self, engine: LedgerEngine):
        self.engine = engine

    def record(self, result: Any, run_id: str, timeline: dict, at: datetime) -> int:
        """Append one measured objective (``result`` is a ``product.slo.SloResult``)."""
        return self.engine.append(
            SLO_RECORDS,
            {
                "partition": result.partition,
                "objective": result.objective,
                "value": result.value,
                "unit": result.unit,
                "target": result.target,
                "met": int(result.met),
                "missed_by": result.missed_by,
                "detail": result.detail,
                "run_id": run_id,
                "timeline_json": json.dumps(timeline, sort_keys=True),
                "recorded_at": format_ts(at),
            },
        )

    def records(self, partition: str | None = None) -> list[dict[str, Any]]:
        where, args = ("partition = ?", (partition,)) if partition else ("", ())
        rows = self.engine.select(SLO_RECORDS, where, args)
        for row in rows:
            row["met"] = bool(row["met"])
            row["timeline"] = json.loads(row.pop("timeline_json") or "{}")
        return rows
