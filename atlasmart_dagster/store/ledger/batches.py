"""Batch records: every raw batch the raw store committed, with its manifest facts (first sighting wins)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Sequence

from ..clock import format_ts
from .engine import LedgerEngine, LedgerTable

BATCHES = LedgerTable(
    "batches",
    """
        batch_id TEXT PRIMARY KEY,
        partition TEXT NOT NULL,
        schema_version TEXT NOT NULL,
        contract_applied TEXT NOT NULL,
        expected_rows INTEGER NOT NULL,
        source_seq_low INTEGER NOT NULL,
        source_seq_high INTEGER NOT NULL,
        ready_at TEXT NOT NULL,
        data_sha256 TEXT NOT NULL,
        data_file TEXT NOT NULL,
        fields_json TEXT NOT NULL,
        first_seen_at TEXT NOT NULL,
        run_id TEXT
    """,
    indexes=("ix_batches_partition ON batches(partition)",),
)


class BatchRecords:
    def __init__(self, engine: LedgerEngine):
        self.engine = engine

    def record(
        self,
        manifest: dict,
        contract_applied: str,
        fields: Sequence[str],
        first_seen_at: datetime,
        run_id: str | None,
    ) -> None:
        """Remember a committed batch (first sighting wins; re-runs add nothing)."""
        self.engine.append(
            BATCHES,
            {
                "batch_id": manifest["batch_id"],
                "partition": manifest["partition"],
                "schema_version": manifest["schema_version"],
                "contract_applied": contract_applied,
                "expected_rows": manifest["expected_rows"],
                "source_seq_low": manifest["source_seq_low"],
                "source_seq_high": manifest["source_seq_high"],
                "ready_at": manifest["ready_at"],
                "data_sha256": manifest["data_sha256"],
                "data_file": manifest["data_file"],
                "fields_json": json.dumps(sorted(fields)),
                "first_seen_at": format_ts(first_seen_at),
                "run_id": run_id,
            },
            ignore_duplicate=True,
        )

    def list(self, partition: str | None = None) -> list[dict[str, Any]]:
        """Batches (of one day, or all) in source order."""
        where, args = ("partition = ?", (partition,)) if partition else ("", ())
        return self.engine.select(BATCHES, where, args, order_by="partition, source_seq_low, batch_id")

    def overlapping(self, low: int, high: int, outside: str, also: str = "") -> list[dict[str, Any]]:
        """Batches of days other than ``outside`` whose recorded source_seq range meets ``low..high``, in source order.

        One query over the ledger. A batch of no rows carries no sequence
        numbers, whatever range its manifest names, so it never meets one.
        ``also`` is a further trusted predicate on ``batches`` written by its
        caller (``product/batch_lifecycle.py`` leaves retired batches out).
        """
        where = "partition <> ? AND expected_rows > 0 AND source_seq_low <= ? AND source_seq_high >= ?"
        return self.engine.select(
            BATCHES, f"{where} AND ({also})" if also else where, (outside, high, low),
            order_by="source_seq_low, partition, batch_id",
        )
