"""The one read model of a day: what each (asset, day) went through and what it serves now.

Every surface that asks "what is this day now" (the certification gate and its
sensor, serving and ``status``, the ``served_*`` assets, SLOs, dashboards,
detection, triage, notices, metrics, recovery and maintenance) reads it from a
``DayStates`` built once per command, sensor tick or request: one ``SELECT``
over ``partition_events``, grouped in memory per (asset, day). The rules that
turn events into a state live here and nowhere else (a layout test holds it):

- the *served version* of an (asset, day) is its newest certification that no
  withdrawal names; its version number counts content changes (fingerprints),
  so a replay of identical rows is not a restatement;
- a day is *withdrawn* when a withdrawal follows the served certification (or
  nothing is served any more after one);
- a *restatement is pending* when a ``RESTATEMENT_PENDING`` follows the newest
  certification;
- a build is *undecided* until a certification or refusal names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Iterator

from .partition_states import (
    BLOCKED_UPSTREAM,
    BUILT,
    CERTIFICATION_REFUSED,
    CERTIFIED,
    PARTITION_EVENTS,
    RESTATEMENT_PENDING,
    WITHDRAWN,
    PartitionEvent,
    PartitionStates,
    ServedVersion,
)
from .engine import LedgerEngine, where_clause

DECISIONS = (CERTIFIED, CERTIFICATION_REFUSED)


@dataclass(frozen=True)
class AssetDay:
    """The history of one (asset, day), oldest first, and what it amounts to."""

    asset: str
    day: str
    history: tuple[PartitionEvent, ...] = ()

    def of(self, *states: str) -> list[PartitionEvent]:
        return [e for e in self.history if e.state in states]

    @cached_property
    def builds(self) -> list[PartitionEvent]:
        return self.of(BUILT)

    @cached_property
    def certifications(self) -> list[PartitionEvent]:
        return self.of(CERTIFIED)

    @cached_property
    def decisions(self) -> list[PartitionEvent]:
        """Certifications and refusals, oldest first."""
        return self.of(*DECISIONS)

    @cached_property
    def refusals(self) -> list[PartitionEvent]:
        return self.of(CERTIFICATION_REFUSED)

    @cached_property
    def blocked(self) -> list[PartitionEvent]:
        return self.of(BLOCKED_UPSTREAM)

    @cached_property
    def withdrawals(self) -> list[PartitionEvent]:
        return self.of(WITHDRAWN)

    @cached_property
    def withdrawn_ids(self) -> frozenset[int]:
        return frozenset(i for e in self.withdrawals for i in e.detail.get("certification_ids", []))

    @cached_property
    def versions(self) -> list[ServedVersion]:
        """Every content version ever certified, oldest first, withdrawn or not.

        Each entry is the newest certification of that content (its snapshot
        holds the rows), with the time consumers were first given it: a
        consumer who exported version 1 can still read what it said.
        """
        versions: list[ServedVersion] = []
        previous = None
        for event in self.certifications:
            if event.fingerprint != previous:
                versions.append(ServedVersion(event, version=len(versions) + 1, certified_at=event.recorded_at))
                previous = event.fingerprint
            else:
                versions[-1] = ServedVersion(event, version=versions[-1].version, certified_at=versions[-1].certified_at)
        return versions

    @cached_property
    def served(self) -> ServedVersion | None:
        """The newest certification no withdrawal names, or None."""
        history = self.certifications
        live = [e for e in history if e.id not in self.withdrawn_ids]
        if not live:
            return None
        newest = live[-1]
        return ServedVersion(newest, version=_content_version(history, newest),
                             certified_at=_first_served_at(history, newest, self.withdrawn_ids))

    @property
    def withdrawn(self) -> bool:
        """A withdrawal came after what is served now (or nothing is served after one)."""
        after = self.served.certification.id if self.served else 0
        return any(e.id > after for e in self.withdrawals)

    @property
    def restatement_pending(self) -> bool:
        last_certified = max((e.id for e in self.certifications), default=0)
        return any(e.id > last_certified for e in self.of(RESTATEMENT_PENDING))

    @cached_property
    def undecided_builds(self) -> list[PartitionEvent]:
        """Builds no certification or refusal names (``built_event_id``)."""
        decided = {e.detail.get("built_event_id") for e in self.decisions}
        return [b for b in self.builds if b.id not in decided]

    def decision_of(self, build: PartitionEvent) -> PartitionEvent | None:
        return next((e for e in reversed(self.decisions) if e.detail.get("built_event_id") == build.id), None)

    def build_up_to(self, event_id: int) -> PartitionEvent | None:
        """The newest build recorded at or before ``event_id`` (what a certification pinned)."""
        pinned = [b for b in self.builds if b.id <= event_id]
        return pinned[-1] if pinned else None

    @property
    def latest_refusal(self) -> PartitionEvent | None:
        """The newest refusal, if it is newer than every certification."""
        refusal = self.refusals[-1] if self.refusals else None
        if refusal is None or any(e.id > refusal.id for e in self.certifications):
            return None
        return refusal


@dataclass
class DayStates:
    """Every (asset, day) of a read, from one query. Build it once, hand it down."""

    by_key: dict[tuple[str, str], AssetDay] = field(default_factory=dict)
    ordered: list[PartitionEvent] = field(default_factory=list)

    @classmethod
    def read(
        cls, engine: LedgerEngine, days: Iterable[str] | None = None, assets: Iterable[str] | None = None
    ) -> "DayStates":
        """One ``SELECT`` over the ledger's partition events, restricted to ``days``/``assets`` when given."""
        where, args = where_clause({}, {"partition": sorted(set(days)) if days is not None else None,
                                        "asset": sorted(set(assets)) if assets is not None else None})
        events = [PartitionEvent.from_row(r) for r in engine.select(PARTITION_EVENTS, where, args, order_by="id")]
        return cls.of_events(events)

    @classmethod
    def of_events(cls, events: Iterable[PartitionEvent]) -> "DayStates":
        grouped: dict[tuple[str, str], list[PartitionEvent]] = {}
        ordered = list(events)
        for event in ordered:
            grouped.setdefault((event.asset, event.partition), []).append(event)
        return cls({key: AssetDay(key[0], key[1], tuple(h)) for key, h in grouped.items()}, ordered)

    def get(self, asset: str, day: str) -> AssetDay:
        return self.by_key.get((asset, day)) or AssetDay(asset, day)

    def __iter__(self) -> Iterator[AssetDay]:
        return iter(self.by_key.values())

    def of_asset(self, asset: str) -> list[AssetDay]:
        return sorted((d for (a, _), d in self.by_key.items() if a == asset), key=lambda d: d.day)

    def days(self, states: Iterable[str] | None = None) -> list[str]:
        """Days that have any event (of ``states`` when given)."""
        wanted = set(states) if states is not None else None
        return sorted({e.partition for e in self.ordered if wanted is None or e.state in wanted})

    def served(self, asset: str, day: str) -> ServedVersion | None:
        return self.get(asset, day).served

    def served_map(self, asset: str) -> dict[str, ServedVersion]:
        return {d.day: d.served for d in self.of_asset(asset) if d.served is not None}

    def versions_map(self, asset: str) -> dict[str, list[ServedVersion]]:
        return {d.day: d.versions for d in self.of_asset(asset) if d.versions}

    def all_served(self, assets: Iterable[str], day: str) -> bool:
        return all(self.served(a, day) for a in assets)

    def events(
        self,
        states: Iterable[str] | None = None,
        *,
        asset: str | None = None,
        assets: Iterable[str] | None = None,
        day: str | None = None,
        run_id: str | None = None,
    ) -> list[PartitionEvent]:
        """The read's events in ledger order, filtered in memory (no second query)."""
        wanted = set(states) if states is not None else None
        names = set(assets) if assets is not None else None
        return [
            e for e in self.ordered
            if (wanted is None or e.state in wanted) and (asset is None or e.asset == asset)
            and (names is None or e.asset in names) and (day is None or e.partition == day)
            and (run_id is None or e.run_id == run_id)
        ]

    def pinned_build(self, relation: str, certification: PartitionEvent) -> PartitionEvent | None:
        """The build of ``relation`` a certification of the same day reconciled against."""
        anchor = certification.detail.get("built_event_id") or certification.id
        return self.get(relation, certification.partition).build_up_to(anchor)


def _content_version(history: list[PartitionEvent], target: PartitionEvent) -> int:
    """1 + the number of times the certified content changed up to ``target``.

    Re-certifying identical rows (same fingerprint) is not a new version: a
    replay must not look like a restatement to consumers.
    """
    version, previous = 0, None
    for event in history:
        if event.fingerprint != previous:
            version += 1
            previous = event.fingerprint
        if event.id == target.id:
            return version
    return version


def _first_served_at(history: list[PartitionEvent], newest: PartitionEvent, withdrawn: frozenset[int]) -> str:
    """When the content of ``newest`` started being served without a break.

    Walks back over certifications of the same fingerprint; a withdrawn one, or
    another content in between, is a break (what follows it was delivered anew).
    """
    at = newest.recorded_at
    for event in reversed(history[: history.index(newest)]):
        if event.id in withdrawn or event.fingerprint != newest.fingerprint:
            break
        at = event.recorded_at
    return at


class PartitionReads(PartitionStates):
    """``ledger.partitions``: the partition events, and the day states they amount to."""

    def states(self, days: Iterable[str] | None = None, assets: Iterable[str] | None = None) -> DayStates:
        """The read model of ``days`` (all when None) from one query."""
        return DayStates.read(self.engine, days, assets)

    def of_run(self, run_id: str) -> DayStates:
        """The read model of what one run recorded (its builds and the decisions naming them)."""
        return DayStates.of_events(self.events(run_id=run_id))

    def served(self, asset: str, partition: str) -> ServedVersion | None:
        """The served version of one (asset, partition); read many through ``states``."""
        return self.states([partition], [asset]).served(asset, partition)

    def versions_map(self, asset: str, partitions: Iterable[str] | None = None) -> dict[str, list[ServedVersion]]:
        """Every content version ever certified per partition of ``asset`` (see ``AssetDay.versions``)."""
        return self.states(partitions, [asset]).versions_map(asset)

    def served_map(self, asset: str) -> dict[str, ServedVersion]:
        """Served certification per partition of ``asset`` (see ``AssetDay.served``)."""
        return self.states(None, [asset]).served_map(asset)
