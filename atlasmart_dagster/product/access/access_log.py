"""The access log: every query and privileged action a principal attempted, allowed or denied.

Statements can hold PII literals, so only their SHA-256 is stored.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ...store.clock import format_ts
from ...store.ledger import Ledger
from ...store.ledger.engine import LedgerTable
from ...store.platform import Platform
from .policy import Principal

ACCESS_LOG = LedgerTable(
    "access_log",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        principal TEXT NOT NULL,
        principal_kind TEXT NOT NULL,
        role TEXT NOT NULL,
        statement_sha256 TEXT NOT NULL,
        decision TEXT NOT NULL,
        reason TEXT NOT NULL,
        at TEXT NOT NULL
    """,
)


def log_decision(platform: Platform, principal: Principal, action: str, decision: str, reason: str) -> None:
    """Append one access decision (a query or a privileged action) to the ledger."""
    platform.ledger.engine.append(
        ACCESS_LOG,
        {
            "principal": principal.name,
            "principal_kind": principal.kind,
            "role": principal.role,
            "statement_sha256": hashlib.sha256(action.encode()).hexdigest(),
            "decision": decision,
            "reason": reason,
            "at": format_ts(platform.clock.now()),
        },
    )


def access_log(ledger: Ledger) -> list[dict[str, Any]]:
    """Every logged decision, oldest first."""
    return ledger.engine.select(ACCESS_LOG)
