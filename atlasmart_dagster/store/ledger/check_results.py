"""Check results: every check's verdict per partition and run, with observed and expected figures.

Dagster records one evaluation per check per run (unpartitioned in range
runs); the certification gate needs each day's verdict, so it is kept here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from ..clock import format_ts
from .engine import LedgerEngine, LedgerTable, dumps, loads, where_clause

CHECK_RESULTS = LedgerTable(
    "check_results",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        asset TEXT NOT NULL,
        check_name TEXT NOT NULL,
        partition TEXT NOT NULL,
        passed INTEGER NOT NULL,
        blocking INTEGER NOT NULL,
        observed_json TEXT,
        expected_json TEXT,
        run_id TEXT,
        recorded_at TEXT NOT NULL
    """,
    indexes=(
        "ix_checks_partition ON check_results(partition, asset, check_name, id)",
        "ix_checks_run ON check_results(run_id)",
    ),
)


class CheckResults:
    def __init__(self, engine: LedgerEngine):
        self.engine = engine

    def record(
        self,
        asset: str,
        check_name: str,
        partition: str,
        passed: bool,
        blocking: bool,
        at: datetime,
        run_id: str | None,
        observed: Any = None,
        expected: Any = None,
    ) -> int:
        return self.engine.append(
            CHECK_RESULTS,
            {
                "asset": asset,
                "check_name": check_name,
                "partition": partition,
                "passed": int(passed),
                "blocking": int(blocking),
                "observed_json": dumps(observed),
                "expected_json": dumps(expected),
                "run_id": run_id,
                "recorded_at": format_ts(at),
            },
        )

    def results(
        self,
        run_id: str | None = None,
        partition: str | None = None,
        asset: str | None = None,
        partitions: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        where, args = where_clause({"run_id": run_id, "partition": partition, "asset": asset}, {"partition": partitions})
        out = []
        for item in self.engine.select(CHECK_RESULTS, where, args, order_by="id"):
            item["passed"] = bool(item["passed"])
            item["blocking"] = bool(item["blocking"])
            item["observed"] = loads(item.pop("observed_json"))
            item["expected"] = loads(item.pop("expected_json"))
            out.append(item)
        return out
