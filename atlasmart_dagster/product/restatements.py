"""The restatement guard: a re-send that moves a certified day beyond tolerance waits for its owner.

A new batch for a day consumers were already served is rebuilt and checked
like any other. The certification gate compares the candidate's controls
with the served ones (``RestatementTolerance`` of the day's contract); beyond
tolerance it refuses with ``RESTATEMENT_HELD`` and consumers keep the
certified version. The data owner then either approves exactly those
figures (``approve_restatement``; the held build is certified as the next
version) or rejects them by retiring the batch (``batch_lifecycle.py``) and
reloading the day.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Sequence

from ..domain.controls import ControlTuple
from ..errors import AtlasmartError
from ..store.clock import format_ts
from ..store.ledger import Ledger
from ..store.ledger.engine import LedgerTable, dumps, where_clause
from ..store.ledger.day_states import DayStates
from ..store.ledger.partition_states import CERTIFICATION_REFUSED, CERTIFIED, PartitionEvent
from ..store.platform import Platform
from ..store.tables import CERTIFIED_ASSETS
from .contract_approvals import contract_of_day

RESTATEMENT_HELD = "restatement held for the data owner's approval"

RESTATEMENT_APPROVALS = LedgerTable(
    "restatement_approvals",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        partition TEXT NOT NULL,
        controls_json TEXT NOT NULL,
        owner TEXT NOT NULL,
        approved_by TEXT NOT NULL,
        reason TEXT NOT NULL,
        incident_id TEXT,
        at TEXT NOT NULL
    """,
)


class RestatementError(AtlasmartError):
    """A restatement decision that cannot be taken."""


def approved_controls(ledger: Ledger, partitions) -> dict[str, list[ControlTuple]]:
    """Per day, the candidate figures its owner approved."""
    where, args = where_clause({}, {"partition": sorted(set(partitions))})
    rows = ledger.engine.select(RESTATEMENT_APPROVALS, where, args)
    found: dict[str, list[ControlTuple]] = {}
    for row in rows:
        found.setdefault(row["partition"], []).append(ControlTuple.from_mapping(json.loads(row["controls_json"])))
    return found


def held_builds(platform: Platform, partition: str, prefix: str = RESTATEMENT_HELD,
                states: DayStates | None = None) -> list[PartitionEvent]:
    """The newest build of each certified product of the day, where the gate held it with ``prefix``
    (a restatement; the anomaly guard asks with its own). ``states``: a read model holding the day, when the
    caller has one."""
    states = states or platform.ledger.partitions.states([partition], CERTIFIED_ASSETS)
    held = []
    for asset in CERTIFIED_ASSETS:
        day = states.get(asset, partition)
        if not day.builds:
            continue
        newest = day.builds[-1]
        decision = day.decision_of(newest)
        if decision is not None and decision.state == CERTIFICATION_REFUSED and any(
            r.startswith(prefix) for r in decision.detail.get("reasons", [])
        ):
            held.append(newest)
    return held


def check_owner(platform: Platform, partition: str, owner: str, decided_by: str, reason: str) -> None:
    """Refuse a decision on the day's figures unless the day's data owner takes it, named, with a reason."""
    contract = contract_of_day(platform.ledger, partition)
    if owner != contract.owner:
        raise RestatementError(f"the data of {partition} is owned by {contract.owner!r}; {owner!r} cannot decide on it")
    if not decided_by.strip() or not reason.strip():
        raise RestatementError("an owner's decision needs the deciding person and a reason")


def record_approval(platform: Platform, partition: str, controls: ControlTuple, owner: str, approved_by: str,
                    reason: str, at: datetime, incident_id: str | None = None) -> None:
    """Record that the owner approved exactly ``controls`` for the day.

    The table is named for its first use; the anomaly guard (``anomaly.py``)
    records its approvals here too: either guard lets figures an owner signed
    through, and only those figures.
    """
    platform.ledger.engine.append(
        RESTATEMENT_APPROVALS,
        {"partition": partition, "controls_json": dumps(controls.to_json()), "owner": owner,
         "approved_by": approved_by, "reason": reason, "incident_id": incident_id, "at": format_ts(at)},
    )


def refused_controls(platform: Platform, build: PartitionEvent) -> ControlTuple:
    """The controls the gate recorded when it refused ``build``."""
    refusals = platform.ledger.partitions.states([build.partition]).events((CERTIFICATION_REFUSED,))
    return next(e.controls for e in reversed(refusals) if e.detail.get("built_event_id") == build.id)


def approve_restatement(
    platform: Platform, partition: str, owner: str, approved_by: str, reason: str, at: datetime,
    incident_id: str | None = None,
) -> ControlTuple:
    """The owner approves the figures of the day's held candidate; returns them."""
    check_owner(platform, partition, owner, approved_by, reason)
    held = held_builds(platform, partition)
    if not held:
        raise RestatementError(f"no restatement of {partition} is held for approval")
    controls = refused_controls(platform, held[0])
    record_approval(platform, partition, controls, owner, approved_by, reason, at, incident_id)
    return controls


def held_reasons(platform: Platform, partitions: Sequence[str],
                 prefixes: tuple[str, ...] = (RESTATEMENT_HELD,), states: DayStates | None = None) -> dict[str, str]:
    """Per day, the guard's reason when its newest certification decision held a restatement
    (or was refused with another of ``prefixes``).

    One ledger read for all the days: ``atlasmart status`` asks it for a year at once.
    """
    states = states if states is not None else platform.ledger.partitions.states(partitions, CERTIFIED_ASSETS)
    wanted = set(partitions)
    newest: dict[str, PartitionEvent] = {}
    for event in states.events((CERTIFIED, CERTIFICATION_REFUSED), assets=CERTIFIED_ASSETS):
        if event.partition in wanted:
            newest[event.partition] = event
    held = {}
    for day, decision in newest.items():
        if decision.state == CERTIFICATION_REFUSED:
            reason = next((r for r in decision.detail.get("reasons", []) if r.startswith(prefixes)), None)
            if reason:
                held[day] = reason
    return held


def held_reason(platform: Platform, partition: str) -> str | None:
    """The guard's reason when the day's newest certification decision held a restatement (None otherwise)."""
    return held_reasons(platform, [partition]).get(partition)
