"""Detection: turn evidence into signals, and signals into (new or updated) incidents.

Signals come from the ledger and the Dagster instance:

* a blocking check failed (or a dashboard's golden cross-check);
* a partition missed an SLO, including a day the daily delivery tried but did
  not certify by its deadline (its availability miss is recorded here, once
  the deadline passed, so the miss exists even though nothing was delivered);
* a run for the certified chain failed (other than "source not ready");
* a day is still blocked upstream ``SOURCE_LATE_GRACE`` minutes after its schedule
  because nothing complete has arrived (late);
* a delivery was refused by the readiness gate (a lying manifest, a bad hash,
  a malformed file): the source is wrong, not late, whether or not the day is
  served already, so it is signalled at once;
* a re-send the restatement guard held, or a day the anomaly guard held;
* a consumer reported a problem (``atlasmart incident report``);
* raw evidence was lost: the ledger accepted a batch the raw store no longer
  holds (a run of that day refuses; only ``atlasmart restore`` brings it back).

Every signal has a stable key, so detection is idempotent: the sensor can run
every minute and each piece of evidence reaches exactly one incident. A signal
joins an open incident that already covers its day (or the same asset and
check); otherwise it opens a new one.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

import dagster as dg

from ....domain.check_names import GOLDEN_MATCHES_GOVERNED_METRIC
from ....product.anomaly import ANOMALY_HELD
from ....product.batch_lifecycle import lost_batches, retired_batches
from ....product.lanes import CURRENT, MANUAL, lane_of
from ....product.pii import redact_for
from ....product.restatements import RESTATEMENT_HELD
from ....product.slo import SOURCE_LATE_GRACE, record_undelivered, scheduled_at
from ....store.clock import format_ts
from ....store.ledger.day_states import DayStates
from ....store.ledger.partition_states import BLOCKED_UPSTREAM, BUILT, CERTIFICATION_REFUSED
from ....store.platform import Platform
from ....store.tables import CERTIFIED_ASSETS
from ....store.ledger.incidents import Incident, IncidentStore


def _check_signals(platform: Platform) -> list[dict[str, Any]]:
    signals = []
    for r in platform.ledger.checks.results():
        if r["passed"] or not (r["blocking"] or r["check_name"] == GOLDEN_MATCHES_GOVERNED_METRIC):
            continue
        signals.append({
            "key": f"check:{r['id']}",
            "kind": "check_failed",
            "asset": r["asset"],
            "check": r["check_name"],
            "partition": r["partition"],
            "run_id": r["run_id"],
            "observed": r["observed"],
            "expected": r["expected"],
            "detail": f"{r['asset']}:{r['check_name']} failed for {r['partition']}",
        })
    return signals


def _slo_signals(platform: Platform) -> list[dict[str, Any]]:
    return [
        {
            "key": f"slo:{r['id']}",
            "kind": "slo_missed",
            "partition": r["partition"],
            "objective": r["objective"],
            "run_id": r["run_id"],
            "observed": {"value": r["value"], "unit": r["unit"]},
            "expected": {"target": r["target"]},
            "missed_by": r["missed_by"],
            "detail": f"{r['objective']} SLO missed for {r['partition']}"
            + (f" by {r['missed_by']:g} {r['unit']}" if r["missed_by"] is not None else ""),
        }
        for r in platform.ledger.slos.records()
        if not r["met"]
    ]


def _source_late_signals(states: DayStates, blocked: list, now: datetime) -> list[dict[str, Any]]:
    signals, seen = [], set()
    if not blocked:
        return signals
    served = [states.served_map(asset) for asset in CERTIFIED_ASSETS]
    last_built: dict[str, int] = {}
    for e in states.events((BUILT,), asset="raw_order_lines"):
        last_built[e.partition] = max(e.id, last_built.get(e.partition, e.id))
    for event in blocked:
        partition = event.partition
        if not event.detail.get("waiting", True):
            continue  # a refused delivery is wrong, not late: _source_rejected_signals
        if partition in seen or now < scheduled_at(partition) + SOURCE_LATE_GRACE:
            continue
        if all(partition in by_partition for by_partition in served):
            continue
        if last_built.get(partition, event.id) > event.id:  # loaded after it was blocked
            continue
        seen.add(partition)
        signals.append({
            "key": f"source_late:{partition}",
            "kind": "source_late",
            "asset": "raw_order_lines",
            "partition": partition,
            "run_id": event.run_id,
            "observed": {"problems": event.detail.get("problems", []), "now": format_ts(now)},
            "expected": {"ready_by": format_ts(scheduled_at(partition))},
            "detail": f"{partition} still blocked upstream at {format_ts(now)}: "
            + "; ".join(event.detail.get("problems", [])),
        })
    return signals


def _source_rejected_signals(blocked: list) -> list[dict[str, Any]]:
    """A delivery the readiness gate refused: one signal per day and distinct refusal, from any launch path."""
    signals, seen = [], set()
    for event in blocked:
        if event.detail.get("waiting", True):
            continue
        problems = list(event.detail.get("problems", []))
        key = f"source_rejected:{event.partition}:" + hashlib.sha256("\n".join(problems).encode()).hexdigest()[:16]
        if key in seen:
            continue  # the same refusal again (a retry, a re-launch): already one signal
        seen.add(key)
        signals.append({
            "key": key,
            "kind": "source_rejected",
            "asset": "raw_order_lines",
            "partition": event.partition,
            "run_id": event.run_id,
            "observed": {"problems": problems},
            "detail": f"the delivery of {event.partition} was refused: " + "; ".join(problems),
        })
    return signals


def _run_failure_signals(platform: Platform, states: DayStates, instance: dg.DagsterInstance) -> list[dict[str, Any]]:
    blocked_runs = {e.run_id for e in states.events((BLOCKED_UPSTREAM,))}
    signals = []
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE])):
        run = record.dagster_run
        if run.run_id in blocked_runs or lane_of(run.tags, platform.clock.now()) == MANUAL:
            continue
        partition = run.tags.get("dagster/partition") or run.tags.get("dagster/asset_partition_range_start")
        signals.append({
            "key": f"run:{run.run_id}",
            "kind": "run_failed",
            "partition": partition,
            "run_id": run.run_id,
            "job": run.job_name,
            "detail": f"run of {run.job_name} for {partition} failed",
        })
    return signals


def _restatement_signals(states: DayStates) -> list[dict[str, Any]]:
    """A re-send the restatement guard held: certified figures would move beyond tolerance."""
    signals, seen = [], set()
    for event in states.events((CERTIFICATION_REFUSED,), assets=CERTIFIED_ASSETS):
        reason = next((r for r in event.detail.get("reasons", []) if r.startswith(RESTATEMENT_HELD)), None)
        key = f"restatement:{event.partition}:{event.run_id}"
        if reason is None or key in seen:
            continue
        seen.add(key)
        served = states.served(event.asset, event.partition)
        signals.append({
            "key": key,
            "kind": "restatement_held",
            "partition": event.partition,
            "run_id": event.run_id,
            "observed": event.controls.to_json() if event.controls else None,
            "expected": served.certification.controls.to_json() if served and served.certification.controls else None,
            "detail": f"{event.partition}: {reason}",
        })
    return signals


def _anomaly_signals(states: DayStates) -> list[dict[str, Any]]:
    """A day the anomaly guard held: its figures are far from its certified history."""
    signals, seen = [], set()
    for event in states.events((CERTIFICATION_REFUSED,), assets=CERTIFIED_ASSETS):
        reason = next((r for r in event.detail.get("reasons", []) if r.startswith(ANOMALY_HELD)), None)
        key = f"anomaly:{event.partition}:{event.run_id}"
        if reason is None or key in seen:
            continue
        seen.add(key)
        anomaly = event.detail.get("anomaly") or {}
        breaches = anomaly.get("breaches", [])
        gap = anomaly.get("sequence_gap")
        observed = {b["measure"]: b["value"] for b in breaches}
        expected = {b["measure"]: (f"{b['low']}..{b['high']} (median {b['median']} of {b['history_days']} days)"
                                   if not b["extreme"] else f"no extreme jump against every certified day (median "
                                                            f"{b['median']})") for b in breaches}
        if gap:
            observed["source_seq_missing"] = f"{gap['low']}..{gap['high']}"
            expected["source_seq_missing"] = f"at most {gap['tolerance']} numbers missing"
        signals.append({
            "key": key,
            "kind": "anomaly_held",
            "partition": event.partition,
            "run_id": event.run_id,
            "observed": observed,
            "expected": expected,
            "summary": anomaly.get("summary"),
            "consumer_figures": {"observed": anomaly.get("observed"), "usual": anomaly.get("usual")},
            "detail": f"{event.partition}: {reason}",
        })
    return signals


def _raw_evidence_lost_signals(platform: Platform) -> list[dict[str, Any]]:
    """A ledger-accepted batch whose stored raw copy is gone: the evidence is lost until restored from a backup.

    One signal per lost batch (keyed by day and batch), so the sensor opens one
    incident for it however often it runs; the refused runs of that day join it.
    """
    days = sorted({batch["partition"] for batch in platform.ledger.batches.list()})
    retired = set(retired_batches(platform.ledger)) if days else set()
    signals = []
    for day in days:
        held = {s.batch_id for s in platform.raw_store.batches(day)}
        for batch_id in lost_batches(platform.ledger, day, held, retired):
            signals.append({
                "key": f"raw_lost:{day}:{batch_id}",
                "kind": "raw_evidence_lost",
                "asset": "raw_order_lines",
                "partition": day,
                "batch_id": batch_id,
                "observed": {"raw_store": "missing", "batch_id": batch_id},
                "expected": {"raw_store": "holds every ledger-accepted batch"},
                "detail": f"raw evidence lost for sales_date={day}: the ledger accepted batch {batch_id} but the raw "
                          "store no longer holds it; runs of the day refuse; run `atlasmart restore BACKUP`",
            })
    return signals


def collect_signals(platform: Platform, instance: dg.DagsterInstance | None = None,
                    states: DayStates | None = None) -> list[dict[str, Any]]:
    """Every piece of evidence of trouble, from ``states`` (every day's read model; read here when not given)."""
    now = platform.clock.now()
    states = states or platform.ledger.partitions.states()
    # the raw layer's BLOCKED_UPSTREAM events: a waiting day may be late, a refused one is wrong
    blocked = states.events((BLOCKED_UPSTREAM,), asset="raw_order_lines")
    signals = (_check_signals(platform) + _slo_signals(platform) + _source_late_signals(states, blocked, now)
               + _source_rejected_signals(blocked) + _restatement_signals(states) + _anomaly_signals(states)
               + _raw_evidence_lost_signals(platform))
    if instance is not None:
        signals += _run_failure_signals(platform, states, instance)
    return signals


TITLES = {
    "check_failed": lambda s: f"Check failed: {s['asset']}:{s['check']} for {s['partition']}",
    "slo_missed": lambda s: f"SLO missed: {s['objective']} for {s['partition']}",
    "source_late": lambda s: f"Source late: {s['partition']} not ready after its 08:00 schedule",
    "source_rejected": lambda s: (f"Source rejected: the delivery of {s['partition']} was refused: "
                                  + "; ".join(s["observed"]["problems"])[:120]),
    "run_failed": lambda s: f"Run failed: {s['job']} for {s['partition']}",
    "restatement_held": lambda s: f"Restatement held: a re-send of {s['partition']} moves certified figures beyond tolerance",
    "anomaly_held": lambda s: f"Anomaly held: {s.get('summary') or s['partition'] + ' is far from its history'}",
    "consumer_report": lambda s: f"Consumer report: {s['detail'][:80]}",
    "raw_evidence_lost": lambda s: (f"Raw evidence lost: batch {s['batch_id']} of {s['partition']} is missing from the "
                                    "raw store; restore from backup"),
}


def _matches(incident: Incident, signal: dict[str, Any]) -> bool:
    if signal.get("partition") and signal["partition"] in incident.partitions:
        return True
    same_check = any(
        s.get("asset") == signal.get("asset") and s.get("check") == signal.get("check") and s.get("kind") == signal["kind"]
        for s in incident.signals
    )
    return bool(signal.get("asset")) and same_check


def route(
    store: IncidentStore, signal: dict[str, Any], at: datetime, actor: str, seen: set[str] | None = None
) -> str | None:
    """Attach a new signal to the open incident it belongs to, or open one. None if already seen.

    ``seen`` (the keys already routed, from ``store.seen_signal_keys()``) saves
    re-reading every signal event per call; the routed key is added to it.
    """
    if seen is None:
        seen = store.seen_signal_keys()
    if signal["key"] in seen:
        return None
    seen.add(signal["key"])
    for incident in store.open_incidents():
        if _matches(incident, signal):
            store.append(incident.id, at, actor, "signal", signal["detail"], data=signal)
            return incident.id
    incident = store.open(TITLES[signal["kind"]](signal), actor, at)
    store.append(incident.id, at, actor, "signal", signal["detail"], data=signal)
    return incident.id


def record_missed_deadlines(platform: Platform, now: datetime, states: DayStates | None = None) -> list[str]:
    """Record the availability miss of every day the daily delivery tried but has not certified by its deadline."""
    ledger = platform.ledger
    states = states or ledger.partitions.states(assets=["raw_order_lines"])
    days = {p["partition"] for p in ledger.runs.phases() if p["lane"] == CURRENT}
    days |= {e.partition for e in states.events(asset="raw_order_lines") if e.lane == CURRENT}
    return [day for day in sorted(days) if record_undelivered(ledger, day, now) is not None]


def detect(platform: Platform, instance: dg.DagsterInstance | None = None, actor: str = "incident_sensor") -> list[str]:
    """Record missed deadlines, collect signals and route the new ones; returns the ids of incidents opened or updated."""
    store = IncidentStore(platform.ledger)
    at = platform.clock.now()
    # One read of every day for the whole tick: deadlines write SLO records only, never partition events.
    states = platform.ledger.partitions.states()
    record_missed_deadlines(platform, at, states)
    touched = []
    seen = store.seen_signal_keys()
    for signal in collect_signals(platform, instance, states):
        if signal["key"] in seen:
            continue
        incident_id = route(store, signal, at, actor, seen)
        if incident_id and incident_id not in touched:
            touched.append(incident_id)
    return touched


def consumer_report(platform: Platform, reporter: str, text: str, asset: str | None, partition: str | None) -> str:
    """A consumer says something is wrong: open (or update) an incident with their words."""
    store = IncidentStore(platform.ledger)
    at = platform.clock.now()
    signal = {
        "key": f"report:{store.ledger.allocate_id('RPT')}",
        "kind": "consumer_report",
        "asset": asset,
        "partition": partition,
        "reporter": reporter,
        # a reporter may paste a customer's name or email: never stored
        "detail": redact_for(platform)(text),
    }
    return route(store, signal, at, actor=reporter)
