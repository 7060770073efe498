"""Triage by mechanism: classify an incident from evidence, in a fixed order.

1. **source failure**: the ERP batch is missing or late, or its counts are absent;
2. **pipeline or schema bug**: contract or pipeline checks fail, or a mismatch
   appears between two layers inside the job;
3. **semantic error**: the pipeline is healthy but a consumer metric
   disagrees with the governed metric;
4. **warehouse performance**: certified late with correct data and an
   abnormal run duration or queueing;
5. otherwise **needs more evidence**.

Every mechanism is evaluated and listed with the evidence for or against it;
the verdict is the first that holds, and when several hold the verdict says so.
"""

from __future__ import annotations

from typing import Any

from ...domain.check_names import GOLDEN_MATCHES_GOVERNED_METRIC, SOURCE_CONTRACT_CONFORMS
from ...product.slo import SOURCE_LATE_GRACE, scheduled_at
from ...store.clock import minutes_between, parse_ts
from ...store.ledger.partition_states import BLOCKED_UPSTREAM
from ...store.platform import Platform
from .incident_records import Incident

SOURCE, PIPELINE, SEMANTIC, PERFORMANCE, UNKNOWN = (
    "source failure", "pipeline or schema bug", "semantic error", "warehouse performance", "needs more evidence",
)
QUEUE_MINUTES = 10  # ready -> run start beyond this is queueing


def _latest_checks(platform: Platform, partition: str) -> dict[tuple[str, str], dict]:
    latest = {}
    for r in platform.ledger.checks.results(partition=partition):
        latest[(r["asset"], r["check_name"])] = r
    return latest


def classify(platform: Platform, incident: Incident) -> dict[str, Any]:
    ledger = platform.ledger
    mechanisms: dict[str, list[str]] = {m: [] for m in (SOURCE, PIPELINE, SEMANTIC, PERFORMANCE)}
    against: dict[str, list[str]] = {m: [] for m in mechanisms}
    for partition in incident.partitions:
        # 1. source
        blocked = ledger.partitions.events(asset="raw_order_lines", partition=partition, states=(BLOCKED_UPSTREAM,))
        for event in blocked:
            mechanisms[SOURCE].append(f"{partition}: run {event.run_id} blocked upstream at {event.recorded_at}: "
                                      + "; ".join(event.detail.get("problems", [])))
        batches = ledger.batches.list(partition)
        for batch in batches:
            late = minutes_between(scheduled_at(partition), parse_ts(batch["ready_at"]))
            if late > SOURCE_LATE_GRACE.total_seconds() / 60:
                mechanisms[SOURCE].append(
                    f"{partition}: batch {batch['batch_id']} ready_at {batch['ready_at']}, {late:g} min after the schedule")
        if not batches:
            mechanisms[SOURCE].append(f"{partition}: no batch of this day has arrived (counts absent)")
        if not mechanisms[SOURCE]:
            against[SOURCE].append(f"{partition}: batches arrived on time and passed readiness")

        # 2. pipeline / schema, 3. semantic
        latest = _latest_checks(platform, partition)
        pipeline_failed = [r for (asset, check), r in latest.items()
                           if r["blocking"] and not r["passed"]]
        for r in pipeline_failed:
            what = "contract violation" if r["check_name"] == SOURCE_CONTRACT_CONFORMS else "mismatch between layers"
            mechanisms[PIPELINE].append(
                f"{partition}: {r['asset']}:{r['check_name']} failed ({what}); observed {r['observed']}, expected {r['expected']}")
        golden_failed = [r for (asset, check), r in latest.items()
                         if check == GOLDEN_MATCHES_GOVERNED_METRIC and not r["passed"]]
        pipeline_green = latest and not pipeline_failed and any(r["blocking"] for r in latest.values())
        if pipeline_green:
            against[PIPELINE].append(f"{partition}: every pipeline check passed ({sum(1 for r in latest.values() if r['blocking'])} checks)")
        for r in golden_failed:
            if pipeline_green:
                mechanisms[SEMANTIC].append(
                    f"{partition}: {r['asset']} shows {r['observed']} but the governed metric is {r['expected']}, "
                    "while every pipeline check passed")
            else:
                against[SEMANTIC].append(f"{partition}: a consumer figure disagrees, but the pipeline itself is failing")

        # 4. performance
        slo_records = ledger.slos.records(partition)
        for slo in slo_records:
            if slo["met"] or slo["objective"] not in ("availability", "freshness"):
                continue
            timeline = slo["timeline"]
            if not pipeline_green:
                continue
            duration = next((s for s in slo_records if s["objective"] == "duration"), None)
            queue = (minutes_between(parse_ts(timeline["ready_at"]), parse_ts(timeline["run_started_at"]))
                     if timeline.get("ready_at") and timeline.get("run_started_at") else None)
            slow = duration is not None and not duration["met"]
            queued = queue is not None and queue > QUEUE_MINUTES
            if slow or queued:
                mechanisms[PERFORMANCE].append(
                    f"{partition}: certified late with reconciled data; run duration {duration['value'] if duration else '?'} min, "
                    f"queued {'?' if queue is None else f'{queue:g}'} min after the source was ready")
            else:
                against[PERFORMANCE].append(
                    f"{partition}: run took {duration['value'] if duration else '?'} min and started "
                    f"{queue if queue is not None else '?'} min after the source was ready: the platform was not slow")
    holding = [m for m in (SOURCE, PIPELINE, SEMANTIC, PERFORMANCE) if mechanisms[m]]
    verdict = holding[0] if holding else UNKNOWN
    note = (f"several causes hold: {', '.join(holding)}; the first in triage order leads" if len(holding) > 1
            else ("no mechanism is supported by the evidence yet" if not holding else f"only {verdict} holds"))
    return {
        "verdict": verdict,
        "holding": holding,
        "note": note,
        "evidence": {m: mechanisms[m] for m in mechanisms},
        "against": {m: against[m] for m in against if against[m]},
    }
