"""Run records: the phases of each run per partition (for SLO timelines) and the step retries it took.

A step retry is counted first in a file of the home (``RetrySpool``), then
moved to the ledger: the outage a step retries may be the ledger database's
own, and a record it refused must not be lost with the process that took it.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Iterator

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

    def record_retries(self, records: list[dict[str, Any]]) -> None:
        """Steps that started again after a transient failure (``attempt`` counts from 1), in one transaction."""
        with self.engine.transaction():
            for record in records:
                self.engine.append(STEP_RETRIES, {k: record[k] for k in ("run_id", "asset", "attempt", "at")})

    def retries(self, run_ids: list[str] | None = None) -> list[dict[str, Any]]:
        """The recorded step retries, in order; of ``run_ids`` only, if given."""
        if run_ids is None:
            return self.engine.select(STEP_RETRIES, order_by="id")
        where, args = where_clause({}, {"run_id": sorted(set(run_ids))})
        return self.engine.select(STEP_RETRIES, where, args, order_by="id")


def retry_key(record: dict[str, Any]) -> tuple[str, str, int]:
    """What makes a retry one: the run, the asset and the attempt (a step's attempt starts once)."""
    return record["run_id"], record["asset"], int(record["attempt"])


class RetrySpool:
    """Step retries not yet in the ledger: one JSON line each, in a file of the home on this machine's disk.

    ``Platform.record_step_retry`` appends the retry here (fsync'd) before it
    writes the ledger, and ``drain`` moves the lines to the ledger once the
    database takes them. A line that is already in the ledger (a move cut
    short between the commit and the truncation) is not written twice. The
    file is locked (``flock``) for every read and write: the retries of
    parallel runs and the exporter share it.
    """

    def __init__(self, path: Path):
        self.path = Path(path)

    @contextmanager
    def _locked(self) -> Iterator[IO[str]]:
        with open(self.path, "a+", encoding="utf-8") as spool:
            fcntl.flock(spool, fcntl.LOCK_EX)
            yield spool

    def append(self, run_id: str, asset: str, attempt: int, at: datetime) -> None:
        line = json.dumps({"run_id": run_id, "asset": asset, "attempt": attempt, "at": format_ts(at)}, sort_keys=True)
        with self._locked() as spool:
            spool.write(line + "\n")
            spool.flush()
            os.fsync(spool.fileno())

    def has_pending(self) -> bool:
        try:
            return self.path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def pending(self) -> list[dict[str, Any]]:
        """The retries waiting for the ledger, oldest first."""
        if not self.has_pending():
            return []
        with self._locked() as spool:
            return _records(spool)

    def drain(self, runs: RunRecords) -> int:
        """Write the waiting retries the ledger does not have yet, in one transaction, then empty the file.

        An error of the ledger leaves the file as it was (the caller decides
        whether to wait for the database). Returns how many were written.
        """
        if not self.has_pending():
            return 0
        with self._locked() as spool:
            waiting = _records(spool)
            known = {retry_key(r) for r in runs.retries([r["run_id"] for r in waiting])} if waiting else set()
            new = list({retry_key(r): r for r in waiting if retry_key(r) not in known}.values())
            if new:
                runs.record_retries(new)
            spool.truncate(0)
            spool.flush()
            os.fsync(spool.fileno())
        return len(new)


def _records(spool: IO[str]) -> list[dict[str, Any]]:
    """The file's complete lines (a line cut short by a crash mid-write is no record)."""
    spool.seek(0)
    records = []
    for line in spool.read().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
