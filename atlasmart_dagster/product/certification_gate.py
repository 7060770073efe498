"""Certification: where it is decided which version of a partition consumers may read.

Runs build and check; they do not certify. After a run succeeded, the gate
looks at what the run built for each certified asset and partition, and
certifies it only if all of these hold:

1. the run recorded no failed blocking check for the partition, and the
   asset's own reconciliation check ran and passed;
2. no certification hold covers the asset and partition (incident containment);
3. the chain reconciles *at the pinned snapshots*: fact_sales = agg_daily_sales
   = governed metric = the mart, recomputed now from the published tables;
4. the staged rows reconciled (manifest = accepted + quarantined), the day's
   quality is within its contract's thresholds, the fact grain is unique and
   no money is negative, by the latest checks of the day;
5. the fingerprint recomputed at the pinned snapshot equals the one recorded
   at build time (what is certified is exactly what was checked);
6. if the day was certified before (served now or withdrawn since), the new
   controls are within the day's contract tolerance of the last certified
   ones, or the data owner approved exactly these figures
   (``restatements.py``): a re-send that doubles a day is held, never
   certified on its own, not even behind a containment.

A certification appends ``CERTIFIED`` (asset, partition, snapshot id,
fingerprint, control tuple, run id, lane, time, actor) to the ledger; a refusal
appends ``CERTIFICATION_REFUSED`` with its reasons. Consumers read each
partition at its newest certification that was not withdrawn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ..domain.check_names import QUALITY_WITHIN_THRESHOLDS
from ..domain.controls import ControlTuple
from ..store.ledger.holds import covering_hold
from ..store.ledger.day_states import DayStates
from ..store.ledger.partition_states import CERTIFICATION_REFUSED, CERTIFIED, PartitionEvent
from ..store.platform import Platform
from ..store.tables import (
    AGG_DAILY_SALES,
    CERTIFIED_ASSETS,
    FACT_SALES,
    METRIC_GROSS_REVENUE,
    REGISTRY,
    STG_ORDER_LINES,
    TABLES_BY_NAME,
)
from .anomaly import PROFILE_KEY, judge, profile
from .contract_approvals import contract_of_day
from .published_controls import controls_of, fact_controls_and_drift_of, fingerprints_of, metric_revenue_of
from .restatements import RESTATEMENT_HELD, approved_controls



def upstream_checks() -> list[tuple[str, str]]:
    """Checks of the upstream chain whose latest result for the day must be a pass (the registry's gate_checks)."""
    return [(spec.name, check) for spec in REGISTRY for check in spec.gate_checks]


@dataclass
class GateDecision:
    asset: str
    partition: str
    certified: bool
    reasons: list[str] = field(default_factory=list)
    snapshot_id: int | None = None
    fingerprint: str | None = None
    controls: ControlTuple | None = None
    profile: dict | None = None  # the day's measures (anomaly.py), kept with a certification
    notes: list[str] = field(default_factory=list)  # said, but not a reason to refuse
    anomaly: dict | None = None  # the anomaly guard's breaches and consumer words, when it held the day

    def to_json(self) -> dict:
        return {
            "asset": self.asset,
            "partition": self.partition,
            "certified": self.certified,
            "reasons": self.reasons,
            "notes": self.notes,
            "snapshot_id": self.snapshot_id,
            "fingerprint": self.fingerprint,
            "controls": self.controls.to_json() if self.controls else None,
        }


class GateEvidence:
    """Everything the gate needs for a set of builds, read in bulk.

    The gate judges each (asset, day) on its own, but reading the ledger and
    the tables once per day made certifying a year of days slower than
    building it; here every table version is read once for all its days.
    """

    def __init__(self, platform: Platform, builds: list[PartitionEvent], states: DayStates | None = None):
        self.platform = platform
        ledger = platform.ledger
        days = sorted({b.partition for b in builds})
        # Only the days being judged, through the ledger's indexes: the
        # history grows every day and the daily path must not read all of it.
        assets = {FACT_SALES.name, AGG_DAILY_SALES.name, METRIC_GROSS_REVENUE.name, *(b.asset for b in builds)}
        self.states = states if states is not None else ledger.partitions.states(days, assets)
        self.checks: dict[tuple[str, str], list[dict]] = {}
        self._by_run: dict[tuple[str, str], list[dict]] = {}
        for result in ledger.checks.results(partitions=days):
            self.checks.setdefault((result["asset"], result["partition"]), []).append(result)
            self._by_run.setdefault((result["run_id"], result["partition"]), []).append(result)
        self.holds = ledger.holds.active()
        # The last figures consumers were given for each day, withdrawn or not: containment withdraws
        # a version, and a repair must not slip a large unapproved change in behind it.
        self.last_certified: dict[tuple[str, str], PartitionEvent] = {
            (b.asset, b.partition): certs[-1]
            for b in builds if (certs := self.states.get(b.asset, b.partition).certifications)
        }
        self.approved = approved_controls(ledger, days)
        self._contracts: dict[str, Any] = {}
        self._controls: dict[tuple[str, int | None], dict] = {}
        self._revenue: dict[tuple[str, int | None], dict] = {}
        self._fingerprints: dict[tuple[str, int | None], dict] = {}
        self._fact_reads: dict[tuple[str, int | None], dict] = {}
        self._days_by_snapshot: dict[tuple[str, int | None], set[str]] = {}

    def latest_built(self, asset: str, partition: str, up_to_id: int) -> PartitionEvent | None:
        return self.states.get(asset, partition).build_up_to(up_to_id)

    def latest_check(self, asset: str, check: str, partition: str) -> dict | None:
        results = [r for r in self.checks.get((asset, partition), []) if r["check_name"] == check]
        return results[-1] if results else None

    def run_checks(self, run_id: str, partition: str) -> list[dict]:
        return self._by_run.get((run_id, partition), [])

    def hold(self, asset: str, partition: str) -> dict | None:
        return covering_hold(self.holds, asset, partition)

    def restatement_breaches(self, built: PartitionEvent, candidate: ControlTuple) -> list[str]:
        """Beyond-tolerance changes of ``candidate`` against the served version (none if nothing is served)."""
        last = self.last_certified.get((built.asset, built.partition))
        if last is None or last.controls in (None, candidate):
            return []
        if candidate in self.approved.get(built.partition, []):
            return []
        if built.partition not in self._contracts:
            self._contracts[built.partition] = contract_of_day(self.platform.ledger, built.partition)
        breaches = self._contracts[built.partition].restatement.breaches(last.controls, candidate)
        return [f"{RESTATEMENT_HELD}: {'; '.join(breaches)} (against the figures certified {last.recorded_at})"
                ] if breaches else []

    # Table reads: one per (table, snapshot), of the days built into that snapshot.
    # A range run commits one snapshot per chunk of days; reading every day of
    # the run at every chunk's snapshot made certifying a year quadratic.
    def _built_at(self, asset: str, snapshot_id: int | None) -> set[str]:
        key = (asset, snapshot_id)
        if key not in self._days_by_snapshot:
            self._days_by_snapshot[key] = {
                day.day for day in self.states.of_asset(asset) for event in day.builds if event.snapshot_id == snapshot_id
            }
        return self._days_by_snapshot[key]

    def _read_at(self, cache: dict, asset: str, snapshot_id: int | None, partition: str, read) -> Any:
        key = (asset, snapshot_id)
        found = cache.get(key)
        if found is None or partition not in found:
            days = sorted(self._built_at(asset, snapshot_id) | {partition}) if found is None else [partition]
            found = cache[key] = {**(found or {}), **read(days)}
        return found[partition]

    def controls(self, spec, snapshot_id: int | None, partition: str) -> ControlTuple:
        if spec == FACT_SALES:
            return self._fact(snapshot_id, partition)[0]
        return self._read_at(
            self._controls, spec.name, snapshot_id, partition,
            lambda days: controls_of(self.platform.warehouse, spec, days, snapshot_id),
        )

    def _fact(self, snapshot_id: int | None, partition: str) -> tuple[ControlTuple, int]:
        """The fact's controls and event-day drift of the day: one scan of the fact per snapshot for both."""
        return self._read_at(
            self._fact_reads, FACT_SALES.name, snapshot_id, partition,
            lambda days: fact_controls_and_drift_of(self.platform.warehouse, days, snapshot_id),
        )

    def revenue(self, snapshot_id: int | None, partition: str):
        return self._read_at(
            self._revenue, METRIC_GROSS_REVENUE.name, snapshot_id, partition,
            lambda days: metric_revenue_of(self.platform.warehouse, days, snapshot_id),
        )

    def drift_lines(self, snapshot_id: int | None, partition: str) -> int:
        return self._fact(snapshot_id, partition)[1]

    def profile(self, built: PartitionEvent, controls: ControlTuple) -> dict:
        """The day's measures under ``built``: controls, quarantined share, event-day drift."""
        fact = built if built.asset == FACT_SALES.name else self.latest_built(FACT_SALES.name, built.partition, built.id)
        quality = self.latest_check(STG_ORDER_LINES.name, QUALITY_WITHIN_THRESHOLDS, built.partition)
        drift = self.drift_lines(fact.snapshot_id, built.partition) if fact is not None else None
        return profile(controls, quality["observed"] if quality else None, drift)

    def fingerprint(self, spec, snapshot_id: int | None, partition: str) -> str:
        return self._read_at(
            self._fingerprints, spec.name, snapshot_id, partition,
            lambda days: fingerprints_of(self.platform.warehouse, spec, days, snapshot_id),
        )


def chain_reasons(evidence: GateEvidence, built: PartitionEvent) -> tuple[list[str], ControlTuple | None]:
    """Reasons the chain under ``built`` does not reconcile (empty when it does), and the fact controls."""
    partition = built.partition
    reasons: list[str] = []
    pinned = {}
    for asset in (FACT_SALES.name, AGG_DAILY_SALES.name, METRIC_GROSS_REVENUE.name):
        event = built if built.asset == asset else evidence.latest_built(asset, partition, up_to_id=built.id)
        if event is None:
            reasons.append(f"{asset} was never built for {partition}")
        pinned[asset] = event.snapshot_id if event else None
    if reasons:
        return reasons, None
    fact = evidence.controls(FACT_SALES, pinned[FACT_SALES.name], partition)
    agg = evidence.controls(AGG_DAILY_SALES, pinned[AGG_DAILY_SALES.name], partition)
    metric = evidence.revenue(pinned[METRIC_GROSS_REVENUE.name], partition)
    if agg != fact:
        reasons.append(f"agg_daily_sales {agg} differs from fact_sales {fact}")
    if metric != fact.revenue_usd:
        reasons.append(f"governed revenue {metric} differs from fact revenue {fact.revenue_usd}")
    if built.asset != METRIC_GROSS_REVENUE.name:
        mart = evidence.controls(TABLES_BY_NAME[built.asset], built.snapshot_id, partition)
        if mart != fact:
            reasons.append(f"{built.asset} {mart} differs from fact_sales {fact}")
    for asset, check in upstream_checks():
        latest = evidence.latest_check(asset, check, partition)
        if latest is None or not latest["passed"]:
            reasons.append(f"latest {asset}:{check} for {partition} is {'missing' if latest is None else 'failed'}")
    return reasons, fact


def decide(evidence: GateEvidence, built: PartitionEvent, run_succeeded: bool) -> GateDecision:
    """Run the gate for one BUILT candidate (no ledger writes)."""
    decision = GateDecision(built.asset, built.partition, False, snapshot_id=built.snapshot_id, fingerprint=built.fingerprint)
    if not run_succeeded:
        decision.reasons.append(f"run {built.run_id} did not succeed")
    run_checks = evidence.run_checks(built.run_id, built.partition)
    for failed in (c for c in run_checks if c["blocking"] and not c["passed"]):
        decision.reasons.append(f"blocking check {failed['asset']}:{failed['check_name']} failed in run {built.run_id}")
    own = TABLES_BY_NAME[built.asset].reconciled_by
    if not any(c["asset"] == built.asset and c["check_name"] == own and c["passed"] for c in run_checks):
        decision.reasons.append(f"{built.asset}:{own} did not pass in run {built.run_id}")
    hold = evidence.hold(built.asset, built.partition)
    if hold is not None:
        decision.reasons.append(f"certification held by {hold['incident_id'] or hold['actor']}: {hold['reason']}")
    chain, fact_controls = chain_reasons(evidence, built)
    decision.reasons.extend(chain)
    decision.controls = fact_controls
    if fact_controls is not None:
        decision.reasons.extend(evidence.restatement_breaches(built, fact_controls))
    recomputed = evidence.fingerprint(TABLES_BY_NAME[built.asset], built.snapshot_id, built.partition)
    if recomputed != built.fingerprint:
        decision.reasons.append(
            f"fingerprint at snapshot {built.snapshot_id} is {recomputed[:12]}…, not the built {str(built.fingerprint)[:12]}…"
        )
    decision.certified = not decision.reasons
    return decision


def hold_anomalies(evidence: GateEvidence, builds: list[PartitionEvent], decisions: list[GateDecision]) -> None:
    """Gate 7: profile every day about to be certified; hold first certifications beyond their anomaly band."""
    profiles: dict[str, dict] = {}
    first: set[str] = set()
    for event, decision in zip(builds, decisions):
        if decision.controls is None:
            continue
        day = event.partition
        if day not in profiles:
            profiles[day] = evidence.profile(event, decision.controls)
        decision.profile = profiles[day]
        never_certified = not any((asset, day) in evidence.last_certified for asset in CERTIFIED_ASSETS)
        approved = decision.controls in evidence.approved.get(day, [])
        if decision.certified and never_certified and not approved:
            first.add(day)
    verdicts = judge(evidence.platform, {day: profiles[day] for day in first})
    for event, decision in zip(builds, decisions):
        verdict = verdicts.get(event.partition)
        if verdict is None or not decision.certified:
            continue
        if verdict.held:
            decision.reasons.append(verdict.reason())
            decision.certified = False
            decision.anomaly = verdict.to_json()
        elif verdict.note:
            decision.notes.append(verdict.note)


def certify_builds(
    platform: Platform,
    builds: list[PartitionEvent],
    run_succeeded: bool,
    actor: str,
    states: DayStates | None = None,
) -> list[GateDecision]:
    """Run the gate on BUILT candidates and record each decision (also re-deciding refused ones).

    ``states`` is the caller's read of the builds' days, when it has one (the certification sensor does).
    """
    ledger = platform.ledger
    at = platform.clock.now()
    seen = _decisions_of(ledger, builds)
    evidence = GateEvidence(platform, builds, states) if builds else None
    decisions = [decide(evidence, event, run_succeeded) for event in builds]
    if evidence is not None:
        hold_anomalies(evidence, builds, decisions)
    with ledger.transaction():
        # certification_sensor and the command that ran the run may decide the
        # same builds at once; the transaction serialises them, and the second
        # finds a decision newer than what it read and records nothing for that
        # build. (Re-deciding a refused build on purpose, as verification does,
        # still works: its older refusal was already there when it started.)
        now = _decisions_of(ledger, builds)
        kept = [(e, d) for e, d in zip(builds, decisions) if now.get(e.id, 0) <= seen.get(e.id, 0)]
        for event, decision in kept:
            _record_decision(ledger, event, decision, actor, at)
    return [d for _, d in kept]


def _decisions_of(ledger, builds: list[PartitionEvent]) -> dict[int, int]:
    """For each of ``builds`` some decision names, the id of the newest such decision."""
    if not builds:
        return {}
    wanted = {b.id for b in builds}
    newest: dict[int, int] = {}
    # Read afresh, not from the evidence's states: this asks what was decided while the gate judged.
    fresh = ledger.partitions.states(sorted({b.partition for b in builds}), sorted({b.asset for b in builds}))
    for event in fresh.events((CERTIFIED, CERTIFICATION_REFUSED)):
        built = event.detail.get("built_event_id")
        if built in wanted:
            newest[built] = max(newest.get(built, 0), event.id)
    return newest


def _record_decision(ledger, event: PartitionEvent, decision: GateDecision, actor: str, at) -> None:
    ledger.partitions.append(
        event.asset,
        event.partition,
        CERTIFIED if decision.certified else CERTIFICATION_REFUSED,
        at,
        actor=actor,
        snapshot_id=event.snapshot_id,
        fingerprint=event.fingerprint,
        controls=decision.controls,
        run_id=event.run_id,
        lane=event.lane,
        reason=None if decision.certified else "; ".join(decision.reasons),
        detail={"built_event_id": event.id, "reasons": decision.reasons, "notes": decision.notes,
                PROFILE_KEY: decision.profile, **({"anomaly": decision.anomaly} if decision.anomaly else {})},
    )


def certified_partitions(decisions: Iterable[GateDecision]) -> list[str]:
    return sorted({d.partition for d in decisions if d.certified})
