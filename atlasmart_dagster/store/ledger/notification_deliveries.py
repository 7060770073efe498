"""Notification deliveries: every attempt to send a message over a channel, and what came of it.

The outbox itself is not stored: what must be told is derived from the
ledger's own events (``ops/response/notifications/outbox.py``), each message under a
stable key. This table records what was done about each (message, channel):
one row per attempt, ``SENT``, ``FAILED`` (with the error and when the next
attempt is due) or ``GAVE_UP`` (after the last allowed attempt, or at once
when the receiver refused the message itself). The latest row of a pair is its
state; a message is sent again only while its latest row is not ``SENT``, so
delivery is at least once.

A row names the channel and the route, never a secret: no URL, routing key,
password or payload is recorded (the channel's configuration holds where it
goes; its environment holds the secrets).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..clock import format_ts, parse_ts
from .engine import LedgerEngine, LedgerTable, where_clause

SENT, FAILED, GAVE_UP = "SENT", "FAILED", "GAVE_UP"
OUTCOMES = (SENT, FAILED, GAVE_UP)
# The outcomes after which a message is never attempted again over that channel.
FINAL = (SENT, GAVE_UP)

NOTIFICATION_DELIVERIES = LedgerTable(
    "notification_deliveries",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        message_key TEXT NOT NULL,
        channel TEXT NOT NULL,
        route TEXT NOT NULL,
        kind TEXT NOT NULL,
        outcome TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        error TEXT,
        next_attempt_at TEXT,
        at TEXT NOT NULL
    """,
    indexes=("ix_notification_deliveries ON notification_deliveries(message_key, channel, id)",),
)


class NotificationDeliveries:
    def __init__(self, engine: LedgerEngine):
        self.engine = engine

    def record(self, message_key: str, channel: str, route: str, kind: str, outcome: str, attempt: int,
               at: datetime, error: str | None = None, next_attempt_at: datetime | None = None) -> int:
        """Append one attempt's outcome (``error`` must already be free of secrets)."""
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown delivery outcome {outcome!r}")
        return self.engine.append(
            NOTIFICATION_DELIVERIES,
            {
                "message_key": message_key,
                "channel": channel,
                "route": route,
                "kind": kind,
                "outcome": outcome,
                "attempt": attempt,
                "error": error,
                "next_attempt_at": format_ts(next_attempt_at) if next_attempt_at is not None else None,
                "at": format_ts(at),
            },
        )

    def attempts(self, channel: str | None = None, message_key: str | None = None) -> list[dict[str, Any]]:
        """Every recorded attempt, oldest first."""
        where, args = where_clause({"channel": channel, "message_key": message_key})
        return self.engine.select(NOTIFICATION_DELIVERIES, where, args, order_by="id")

    def latest(self, channel: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        """The latest attempt of each (message key, channel): the state of its delivery."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for row in self.attempts(channel):
            out[(row["message_key"], row["channel"])] = row
        return out


def due(row: dict[str, Any] | None, now: datetime) -> bool:
    """Whether a (message, channel) whose latest attempt is ``row`` (None: never attempted) is to be sent now."""
    if row is None:
        return True
    if row["outcome"] in FINAL:
        return False
    return row["next_attempt_at"] is None or parse_ts(row["next_attempt_at"]) <= now
