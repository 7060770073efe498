"""Batch lifecycle: an operator retires a batch (or reinstates it); loads use the day's accepted batches only.

The raw store is write-once, so a bad delivery (a drifted layout the ERP
re-sent correctly, a restatement the data owner rejected) cannot be deleted,
and it must not be: it is evidence. Retiring it is a ledger decision with
actor, reason and incident; every later load of its day leaves it out, and
its bytes stay where they are. The newest decision about a batch wins, so a
retirement made in error is undone by reinstating.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..errors import AtlasmartError
from ..store.clock import format_ts
from ..store.ledger import Ledger
from ..store.ledger.engine import LedgerTable
from ..store.platform import Platform

RETIRED = "RETIRED"
REINSTATED = "REINSTATED"

BATCH_DECISIONS = LedgerTable(
    "batch_decisions",
    """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        batch_id TEXT NOT NULL,
        partition TEXT NOT NULL,
        decision TEXT NOT NULL,
        actor TEXT NOT NULL,
        reason TEXT NOT NULL,
        incident_id TEXT,
        at TEXT NOT NULL
    """,
    indexes=("ix_batch_decisions_partition ON batch_decisions(partition, id)",),
)


class BatchDecisionError(AtlasmartError):
    """A batch decision that cannot be taken (unknown batch, no reason)."""


@dataclass(frozen=True)
class BatchDecision:
    batch_id: str
    partition: str
    decision: str
    actor: str
    reason: str
    incident_id: str | None
    at: str


def decide(
    platform: Platform,
    batch_id: str,
    decision: str,
    actor: str,
    reason: str,
    at: datetime,
    incident_id: str | None = None,
) -> BatchDecision:
    """Retire or reinstate a batch the raw store holds (its bytes are never touched)."""
    if decision not in (RETIRED, REINSTATED):
        raise BatchDecisionError(f"a batch is {RETIRED} or {REINSTATED}, not {decision!r}")
    if not actor.strip() or not reason.strip():
        raise BatchDecisionError("a batch decision needs who takes it and why")
    known = {b["batch_id"]: b["partition"] for b in platform.ledger.batches.list()}
    if batch_id not in known:
        raise BatchDecisionError(f"no batch {batch_id} was ever admitted (see atlasmart batch list)")
    row = {"batch_id": batch_id, "partition": known[batch_id], "decision": decision, "actor": actor,
           "reason": reason, "incident_id": incident_id, "at": format_ts(at)}
    platform.ledger.engine.append(BATCH_DECISIONS, row)
    return BatchDecision(**row)


def decisions(ledger: Ledger, partition: str | None = None) -> list[BatchDecision]:
    where, args = ("partition = ?", (partition,)) if partition else ("", ())
    return [BatchDecision(**{k: r[k] for k in BatchDecision.__dataclass_fields__})
            for r in ledger.engine.select(BATCH_DECISIONS, where, args, order_by="id")]


def retired_batches(ledger: Ledger, partition: str | None = None) -> dict[str, BatchDecision]:
    """Batches whose newest decision is a retirement, with that decision."""
    newest: dict[str, BatchDecision] = {}
    for decision in decisions(ledger, partition):
        newest[decision.batch_id] = decision
    return {b: d for b, d in newest.items() if d.decision == RETIRED}
