"""Run records: the phases of each run per partition (for SLO timelines) and the step retries it took."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..clock import format_ts
from .engine import LedgerEngine, LedgerTable, where_clause

RUN_PHASES = LedgerTable(
    "run_phases",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        partition TEXT NOT NULL,
        phase TEXT NOT NULL,
        at TEXT NOT NULL,
        lane TEXT
    """,
    indexes=("ix_phases_run ON run_phases(run_id, partition)",),
)
STEP_RETRIES = LedgerTable(
    "step_retries",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        asset TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        at TEXT NOT NULL
    """,
)


class RunRecords:
    def __init__(self, engine: LedgerEngine):
        self.engine = engine

    def record_phase(self, run_id: str, partition: str, phase: str, at: datetime, lane: str | None) -> None:
        self.engine.append(
            RUN_PHASES, {"run_id": run_id, "partition": partition, "phase": phase, "at": format_ts(at), "lane": lane}
        )

    def phases(self, run_id: str | None = None, partition: str | None = None) -> list[dict[str, Any]]:
        where, args = where_clause({"run_id": run_id, "partition": partition})
        return self.engine.select(RUN_PHASES, where, args, order_by="id")

    def record_retry(self, run_id: str, asset: str, attempt: int, at: datetime) -> None:
        """A step started again after a transient failure (``attempt`` counts from 1)."""
        self.engine.append(STEP_RETRIES, {"run_id": run_id, "asset": asset, "attempt": attempt, "at": format_ts(at)})

    def retries(self) -> list[dict[str, Any]]:
        return self.engine.select(STEP_RETRIES)
