"""The incident record: append-only events from which an incident's state is derived."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ...errors import AtlasmartError, UsageError
from ..clock import format_ts
from . import Ledger
from .engine import LedgerTable

INCIDENTS = LedgerTable(
    "incidents",
    """
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL,
        opened_at TEXT NOT NULL,
        opened_by TEXT NOT NULL
    """,
)
INCIDENT_EVENTS = LedgerTable(
    "incident_events",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        incident_id TEXT NOT NULL,
        at TEXT NOT NULL,
        actor TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT,
        message TEXT NOT NULL,
        data_json TEXT
    """,
    indexes=("ix_incident_events ON incident_events(incident_id, id)",),
)

OPEN, CONTAINED, IDENTIFIED, REPAIRING, VERIFYING, RESOLVED = (
    "open", "contained", "identified", "repairing", "verifying", "resolved",
)
STATUSES = (OPEN, CONTAINED, IDENTIFIED, REPAIRING, VERIFYING, RESOLVED)


class IncidentError(AtlasmartError):
    """An incident operation that is not allowed (wrong state, missing evidence, invalid input)."""


class UnknownIncident(IncidentError, UsageError):
    """No incident has this id: a wrong argument, nothing was done (the command line exits 2)."""


@dataclass
class Incident:
    id: str
    title: str
    opened_at: str
    opened_by: str
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        current = OPEN
        for event in self.events:
            if event["status"]:
                current = event["status"]
        return current

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == kind]

    def latest(self, kind: str) -> dict[str, Any] | None:
        found = self.of_kind(kind)
        return found[-1] if found else None

    @property
    def signals(self) -> list[dict[str, Any]]:
        return [e["data"] for e in self.of_kind("signal")]

    def _scoped(self, signal_field: str, scope_field: str) -> list[str]:
        """Sorted union of a field over the signals and the latest scope event's list."""
        values = {s.get(signal_field) for s in self.signals if s.get(signal_field)}
        scope = self.latest("scope")
        if scope:
            values.update(scope["data"].get(scope_field, []))
        return sorted(values)

    @property
    def partitions(self) -> list[str]:
        return self._scoped("partition", "partitions")

    @property
    def assets(self) -> list[str]:
        return self._scoped("asset", "assets")

    def to_json(self, with_events: bool = True) -> dict[str, Any]:
        data = {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "opened_at": self.opened_at,
            "opened_by": self.opened_by,
            "partitions": self.partitions,
            "assets": self.assets,
            "signals": self.signals,
        }
        for kind in ("triage", "blast_radius", "last_known_good", "containment", "verification"):
            latest = self.latest(kind)
            data[kind] = latest["data"] if latest else None
        data["notices"] = [e["data"] for e in self.of_kind("notice")]
        data["postmortem_actions"] = postmortem_actions(self)
        if with_events:
            data["timeline"] = [
                {k: e[k] for k in ("at", "actor", "kind", "status", "message")} for e in self.events
            ]
        return data

    def fingerprint(self) -> str:
        """SHA-256 over the canonical incident evidence (run and snapshot ids masked: they are random)."""
        canonical = json.dumps(self.to_json(with_events=True) | {"events": [e["data"] for e in self.events]},
                               sort_keys=True, default=str)
        canonical = _RUN_ID.sub("<run>", canonical)
        return hashlib.sha256(canonical.encode()).hexdigest()


_RUN_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def postmortem_actions(incident: Incident) -> list[dict[str, Any]]:
    actions: dict[str, dict[str, Any]] = {}
    for event in incident.events:
        if event["kind"] == "postmortem_action":
            actions[event["data"]["action_id"]] = {**event["data"], "done": False, "evidence": None}
        elif event["kind"] == "action_done":
            action = actions[event["data"]["action_id"]]
            action.update(done=True, evidence=event["data"]["evidence"], done_at=event["at"])
    return list(actions.values())


class IncidentStore:
    def __init__(self, ledger: Ledger):
        self.ledger = ledger

    def open(self, title: str, actor: str, at: datetime) -> Incident:
        incident_id = self.ledger.allocate_id("INC")
        self.ledger.engine.append(
            INCIDENTS, {"id": incident_id, "title": title, "opened_at": format_ts(at), "opened_by": actor}
        )
        self.append(incident_id, at, actor, "opened", f"incident opened: {title}", status=OPEN)
        return self.get(incident_id)

    def append(
        self,
        incident_id: str,
        at: datetime,
        actor: str,
        kind: str,
        message: str,
        data: dict[str, Any] | None = None,
        status: str | None = None,
    ) -> int:
        if status is not None and status not in STATUSES:
            raise IncidentError(f"unknown status {status!r}")
        return self.ledger.engine.append(
            INCIDENT_EVENTS,
            {
                "incident_id": incident_id,
                "at": format_ts(at),
                "actor": actor,
                "kind": kind,
                "status": status,
                "message": message,
                "data_json": json.dumps(data or {}, sort_keys=True, default=str),
            },
        )

    def advance(self, incident: Incident, status: str, at: datetime, actor: str, message: str) -> None:
        """Move forward in the workflow (never backwards; skipping a step is recorded as such)."""
        if STATUSES.index(status) <= STATUSES.index(incident.status):
            return
        self.append(incident.id, at, actor, "status", message, status=status)

    @staticmethod
    def _incident(row: dict[str, Any], events: list[dict[str, Any]]) -> Incident:
        for event in events:
            event["data"] = json.loads(event.pop("data_json") or "{}")
        return Incident(row["id"], row["title"], row["opened_at"], row["opened_by"], events)

    def get(self, incident_id: str) -> Incident:
        rows = self.ledger.engine.select(INCIDENTS, "id = ?", (incident_id,))
        if not rows:
            raise UnknownIncident(f"no incident {incident_id} (atlasmart incident list --all)")
        return self._incident(rows[0], self.ledger.engine.select(INCIDENT_EVENTS, "incident_id = ?", (incident_id,)))

    def all(self) -> list[Incident]:
        """Every incident, in opening order (two queries: incidents, then all their events)."""
        by_incident: dict[str, list[dict[str, Any]]] = {}
        for event in self.ledger.engine.select(INCIDENT_EVENTS):
            by_incident.setdefault(event["incident_id"], []).append(event)
        return [self._incident(row, by_incident.get(row["id"], [])) for row in self.ledger.engine.select(INCIDENTS)]

    def open_incidents(self) -> list[Incident]:
        return [i for i in self.all() if i.status != RESOLVED]

    def seen_signal_keys(self) -> set[str]:
        keys = set()
        for event in self.ledger.engine.select(INCIDENT_EVENTS, "kind = 'signal'"):
            keys.add(json.loads(event["data_json"]).get("key"))
        return keys
