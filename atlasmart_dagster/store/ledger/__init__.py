"""The ledger: one append-only engine and the stores of the domains that live in ``store/``.

``Ledger(target)`` opens them together, over the SQLite engine for a path
(the embedded home) or the Postgres engine for a ``postgresql://`` URL (the
team deployment): ``partitions`` (states and served
versions), ``batches``, ``checks``, ``holds``, ``slos``, ``backfills``,
``runs`` and ``notifications`` (what notification channels were sent).
Domains that live elsewhere own their tables the same way over
``ledger.engine``: incidents (``store/ledger/incidents.py``), contract approvals
(``product/contract_approvals.py``), dashboard deployments
(``product/dashboards.py``) and the access log (``product/access/access_log.py``).
The engine itself keeps ``home_identity``: the id of the home this ledger
belongs to, which the catalog records too (checked in ``store/platform.py``).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .backfill_requests import BackfillRequests
from .batches import BatchRecords
from .check_results import CheckResults
from .engine import LedgerEngine
from .holds import CertificationHolds
from .notification_deliveries import NotificationDeliveries
from .day_states import PartitionReads
from .run_records import RunRecords
from .slo_records import SloRecords


def open_engine(target: Path | str):
    """The SQLite engine for a file path, the Postgres engine for a ``postgresql://`` URL."""
    if isinstance(target, str) and target.startswith(("postgresql", "postgres://")):
        # Imported only here: psycopg2 comes with the `team` extra, which the
        # embedded default does not need.
        from .postgres_engine import PostgresLedgerEngine

        return PostgresLedgerEngine(target)
    return LedgerEngine(Path(target))


class Ledger:
    """The ledger of one home: its engine and the store-level domain stores over it."""

    def __init__(self, target: Path | str):
        self.engine = open_engine(target)
        self.partitions = PartitionReads(self.engine)
        self.batches = BatchRecords(self.engine)
        self.checks = CheckResults(self.engine)
        self.holds = CertificationHolds(self.engine)
        self.slos = SloRecords(self.engine)
        self.backfills = BackfillRequests(self.engine)
        self.runs = RunRecords(self.engine)
        self.notifications = NotificationDeliveries(self.engine)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Appends of any store inside it commit together (see ``LedgerEngine.transaction``)."""
        with self.engine.transaction():
            yield

    def allocate_id(self, kind: str) -> str:
        return self.engine.allocate_id(kind)

    def close(self) -> None:
        self.engine.close()
