"""Batch lifecycle: an operator retires a batch (or reinstates it); loads use the day's accepted batches only.

The raw store is write-once, so a bad delivery (a drifted layout the ERP
re-sent correctly, a restatement the data owner rejected) cannot be deleted,
and it must not be: it is evidence. Retiring it is a ledger decision with
actor, reason and incident; every later load of its day leaves it out, and
its bytes stay where they are. The newest decision about a batch wins, so a
retirement made in error is undone by reinstating.

The ERP numbers every row version it emits (``source_seq``), so the ranges of
the accepted batches of different days never overlap: a range that goes back
into one another day already committed is a source problem, not a new day.
``sequence_regression`` is that rule, asked by readiness before a batch is
accepted and by ``decide`` before a retired batch is reinstated. Batches of
the same day do not count (a re-delivery supersedes the day's earlier
batches), nor do retired ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Iterable

from ..errors import AtlasmartError
from ..store.clock import format_ts
from ..store.ledger import Ledger
from ..store.ledger.batches import BATCHES
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


# A predicate on ``batches``: the newest decision about the batch retired it (SQLite and Postgres alike).
_NOT_RETIRED = (
    f"NOT EXISTS (SELECT 1 FROM {BATCH_DECISIONS.name} d WHERE d.batch_id = {BATCHES.name}.batch_id "
    f"AND d.partition = {BATCHES.name}.partition AND d.decision = '{RETIRED}' AND d.id = "
    f"(SELECT max(e.id) FROM {BATCH_DECISIONS.name} e WHERE e.batch_id = d.batch_id AND e.partition = d.partition))"
)


@dataclass(frozen=True)
class SeqRange:
    """The source_seq range a batch of a day claims: its manifest's, which readiness holds the rows to."""

    batch_id: str
    partition: str
    low: int
    high: int

    def meets(self, other: "SeqRange") -> bool:
        return self.low <= other.high and other.low <= self.high

    def __str__(self) -> str:
        return f"batch {self.batch_id} of {self.partition} ({self.low}..{self.high})"


def overlapping_batches(ledger: Ledger, claim: SeqRange, pending: tuple[SeqRange, ...] = ()) -> list[SeqRange]:
    """Accepted batches of other days whose committed range overlaps ``claim``'s, lowest first.

    The committed ranges are one query over the batch ledger (accepted: not
    retired); ``pending`` are batches a range run accepted for its earlier
    days, which the ledger records only once the whole run is ready.
    """
    ledger.engine.ensure(BATCH_DECISIONS)  # the predicate reads it before any decision was taken
    found = [SeqRange(r["batch_id"], r["partition"], r["source_seq_low"], r["source_seq_high"])
             for r in ledger.batches.overlapping(claim.low, claim.high, claim.partition, _NOT_RETIRED)]
    found += [p for p in pending if p.partition != claim.partition and p.meets(claim)]
    return sorted(found, key=lambda r: (r.low, r.partition, r.batch_id))


def describe_regression(claim: SeqRange, found: list[SeqRange], reused: list[int] | None = None) -> str:
    text = (f"sequence regression: batch {claim.batch_id} source_seq {claim.low}..{claim.high} overlaps "
            + ", ".join(map(str, found)))
    if reused:
        shown = ", ".join(map(str, reused[:5])) + (", ..." if len(reused) > 5 else "")
        text += f" and reuses their source_seq {shown}"
    return text


def sequence_regression(ledger: Ledger, claim: SeqRange, pending: tuple[SeqRange, ...] = ()) -> str | None:
    """Why ``claim`` may not be accepted (it overlaps the committed range of another day's batch), or None."""
    found = overlapping_batches(ledger, claim, pending)
    return describe_regression(claim, found) if found else None


@dataclass(frozen=True)
class SeqGap:
    """Numbers ``low..high`` no accepted batch carries, between the committed batch ``before`` and the day's ``after``."""

    partition: str
    low: int
    high: int
    before: SeqRange
    after: SeqRange

    @property
    def missing(self) -> int:
        return self.high - self.low + 1

    def __str__(self) -> str:
        return f"source_seq {self.low}..{self.high} missing"

    def describe(self, tolerance: int) -> str:
        """``source_seq 209..229 missing (21 numbers between batch ... and batch ...; the contract tolerates 0)``."""
        return (f"{self} ({self.missing} number{'s' if self.missing != 1 else ''} between {self.before} and "
                f"{self.after}; the contract tolerates {tolerance})")

    def to_json(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "missing": self.missing, "after_batch": self.before.batch_id,
                "after_day": self.before.partition, "before_batch": self.after.batch_id}


def _accepted_ranges(ledger: Ledger) -> tuple[list[SeqRange], set[str]]:
    """The source_seq ranges of every accepted batch with rows, and the days that have any accepted batch."""
    retired = retired_batches(ledger)
    accepted = [r for r in ledger.batches.list() if r["batch_id"] not in retired]
    ranges = [SeqRange(r["batch_id"], r["partition"], r["source_seq_low"], r["source_seq_high"])
              for r in accepted if r["expected_rows"] > 0]
    return ranges, {r["partition"] for r in accepted}


def _uncovered(low: int, high: int, ranges: Iterable[SeqRange]) -> tuple[int, int] | None:
    """The first and last number of ``low..high`` that none of ``ranges`` carries (None: all carried)."""
    missing = [(low, high)]
    for r in ranges:
        missing = [piece for a, b in missing
                   for piece in ((a, min(b, r.low - 1)), (max(a, r.high + 1), b)) if piece[0] <= piece[1]]
    return (missing[0][0], missing[-1][1]) if missing else None


def sequence_boundaries(ledger: Ledger) -> dict[str, SeqGap | None]:
    """Per day whose numbers can be held against the days before it: the gap before its first number (None: none).

    The gap runs from the highest number an earlier day's accepted batch
    carries below the day's first number to that first number; numbers any
    accepted batch carries (a late batch of either day) close it. A day is
    left out when nothing was committed before it, or when a calendar day in
    between has no accepted batch (the numbers may be that day's, not
    delivered yet). One query over the batch ledger.
    """
    ranges, delivered = _accepted_ranges(ledger)
    out: dict[str, SeqGap | None] = {}
    for day in sorted({r.partition for r in ranges}):
        own = [r for r in ranges if r.partition == day]
        first = min(own, key=lambda r: (r.low, r.batch_id))
        before = [r for r in ranges if r.partition < day and r.high < first.low]
        if not before:
            continue
        previous = max(before, key=lambda r: (r.high, r.partition, r.batch_id))
        between = date.fromisoformat(previous.partition) + timedelta(days=1)
        if any((between + timedelta(days=i)).isoformat() not in delivered
               for i in range((date.fromisoformat(day) - between).days)):
            continue
        found = _uncovered(previous.high + 1, first.low - 1, ranges)
        out[day] = SeqGap(day, found[0], found[1], previous, first) if found else None
    return out


def held_gap(boundaries: dict[str, SeqGap | None], day: str, max_gap: int, min_dense: int) -> SeqGap | None:
    """The gap before ``day`` when it exceeds ``max_gap`` and the days before showed a dense numbering.

    Dense: at least ``min_dense`` of the earlier day boundaries are within
    ``max_gap``, and they are most of them. A source that numbers sparsely
    (its days never follow on) says nothing by a gap; one that always
    followed on and suddenly skips lost rows.
    """
    gap = boundaries.get(day)
    if gap is None or gap.missing <= max_gap:
        return None
    earlier = [g for d, g in boundaries.items() if d < day]
    dense = sum(1 for g in earlier if g is None or g.missing <= max_gap)
    return gap if dense >= min_dense and dense * 2 > len(earlier) else None


def sequence_gaps(ledger: Ledger, days: Iterable[str], max_gap: int = 0, min_dense: int = 3) -> dict[str, SeqGap]:
    """Per day, the source_seq gap before it that a ``SequenceContinuity`` of ``max_gap``/``min_dense`` holds."""
    boundaries = sequence_boundaries(ledger)
    found = {day: held_gap(boundaries, day, max_gap, min_dense) for day in days}
    return {day: gap for day, gap in found.items() if gap is not None}


def covering_batches(ledger: Ledger, low: int, high: int) -> list[str]:
    """Accepted batches whose source_seq range meets ``low..high`` (what closed a gap)."""
    ranges, _ = _accepted_ranges(ledger)
    probe = SeqRange("", "", low, high)
    return sorted(r.batch_id for r in ranges if r.meets(probe))


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
    known = {b["batch_id"]: b for b in platform.ledger.batches.list()}
    if batch_id not in known:
        raise BatchDecisionError(f"no batch {batch_id} was ever admitted (see atlasmart batch list)")
    batch = known[batch_id]
    reinstating = decision == REINSTATED and batch_id in retired_batches(platform.ledger, batch["partition"])
    if reinstating and batch["expected_rows"] > 0:
        # While it was retired another day may have been accepted with its sequence numbers.
        claim = SeqRange(batch_id, batch["partition"], batch["source_seq_low"], batch["source_seq_high"])
        regression = sequence_regression(platform.ledger, claim)
        if regression:
            raise BatchDecisionError(f"{regression}: retire the overlapping batch first, or keep {batch_id} retired")
    row = {"batch_id": batch_id, "partition": batch["partition"], "decision": decision, "actor": actor,
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


def lost_batches(ledger: Ledger, partition: str, held: set[str], retired) -> list[str]:
    """Batches the ledger accepted for ``partition`` (not ``retired``) that the raw store no longer holds (``held``).

    The raw store is the evidence: readiness refuses such a day and detection
    opens an incident for it, both from this one comparison.
    """
    return sorted(b["batch_id"] for b in ledger.batches.list(partition)
                  if b["batch_id"] not in retired and b["batch_id"] not in held)
