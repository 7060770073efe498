"""Triage by mechanism: classify an incident from evidence, in a fixed order.

1. **source failure**: the ERP batch is missing, late or partial, or its counts
   are absent, once the source is expected (schedule + grace);
2. **pipeline or schema bug**: contract or pipeline checks fail, a mismatch
   appears between two layers inside the job, or rows were lost on the way
   (completeness SLO missed);
3. **semantic error**: the pipeline is healthy but a consumer metric
   disagrees with the governed metric;
4. **warehouse performance**: the run was slow (duration SLO missed), queued,
   or the platform took too long once the source was ready (freshness), with
   correct data;
5. a day that is **not due yet** (before its deadline, ``slo.due_at``) with
   nothing else wrong: nothing is wrong, tell the consumer when it is due;
6. otherwise **needs more evidence**.

Every mechanism is evaluated and listed with the evidence for or against it,
every recorded SLO objective (freshness, completeness, duration, availability)
of each day is weighed, and each day's due state is part of the result; the
verdict is the first mechanism that holds, and when several hold it says so.
"""

from __future__ import annotations

from typing import Any

from ....domain.check_names import GOLDEN_MATCHES_GOVERNED_METRIC, QUALITY_WITHIN_THRESHOLDS, SOURCE_CONTRACT_CONFORMS
from ....product.anomaly import ANOMALY_HELD, anomaly_reasons
from ....product.dashboards import DEFAULT_DASHBOARDS, certified_connection, current, governed_values, tile_values
from ....product.restatements import held_reason
from ....product.slo import (
    AVAILABILITY,
    COMPLETENESS,
    DURATION,
    FRESHNESS,
    OBJECTIVES,
    SOURCE_LATE_GRACE,
    due_state,
    latest_results,
    scheduled_at,
)
from ....store.clock import format_ts, minutes_between, parse_ts
from ....store.platform import Platform
from ....product.published_controls import controls_of, fingerprints_of
from ....store.tables import CERTIFIED_ASSETS, METRIC_GROSS_REVENUE, TABLES_BY_NAME
from ....store.ledger.incidents import Incident

SOURCE, PIPELINE, SEMANTIC, PERFORMANCE, UNKNOWN = (
    "source failure", "pipeline or schema bug", "semantic error", "warehouse performance", "needs more evidence",
)
NOT_DUE = "not due yet"
MECHANISMS = (SOURCE, PIPELINE, SEMANTIC, PERFORMANCE)
QUEUE_MINUTES = 10  # ready -> run start beyond this is queueing


def _latest_checks(platform: Platform, partition: str) -> dict[tuple[str, str], dict]:
    latest = {}
    for r in platform.ledger.checks.results(partition=partition):
        latest[(r["asset"], r["check_name"])] = r
    return latest


def _slo_evidence(platform: Platform, partition: str, pipeline_green: bool, mechanisms: dict[str, list[str]],
                  against: dict[str, list[str]]) -> dict[str, str]:
    """Weigh every recorded SLO objective of the day; returns ``{objective: description}`` of what was recorded."""
    records = {r["objective"]: r for r in platform.ledger.slos.records(partition)}  # the latest per objective
    results = {r.objective: r for r in latest_results(platform.ledger, partition)}
    timeline = records[AVAILABILITY]["timeline"] if AVAILABILITY in records else {}
    queue = (minutes_between(parse_ts(timeline["ready_at"]), parse_ts(timeline["run_started_at"]))
             if timeline.get("ready_at") and timeline.get("run_started_at") else None)
    queued = queue is not None and queue > QUEUE_MINUTES
    slow = DURATION in results and not results[DURATION].met and results[DURATION].value is not None
    for objective, result in results.items():
        if result.met:
            continue
        if objective == DURATION and slow:
            mechanisms[PERFORMANCE].append(
                f"{partition}: the run took {result.value_text} (target <= {result.target:g} {result.unit}): "
                f"the warehouse or pipeline was slow" + ("" if pipeline_green else ", while checks also failed"))
        elif objective == COMPLETENESS:
            mechanisms[PIPELINE].append(f"{partition}: completeness {result.value_text} ({result.detail}): "
                                        "rows were lost between the manifest and staging")
        elif objective == FRESHNESS:
            if pipeline_green:
                mechanisms[PERFORMANCE].append(
                    f"{partition}: certified {result.value_text} after the source was ready "
                    f"(target <= {result.target:g} {result.unit}) with reconciled data")
            else:
                against[PERFORMANCE].append(f"{partition}: freshness missed, but the pipeline itself is failing")
        elif objective == AVAILABILITY:
            delivered = bool(records[AVAILABILITY]["run_id"])
            if not delivered:
                against[PERFORMANCE].append(f"{partition}: not certified by its deadline ({result.detail}); "
                                            "nothing was delivered, so nothing was slow")
            elif not pipeline_green:
                continue
            elif slow or queued:
                mechanisms[PERFORMANCE].append(
                    f"{partition}: certified late with reconciled data; run duration "
                    f"{results[DURATION].value_text if DURATION in results else '?'}, queued "
                    f"{'?' if queue is None else f'{queue:g}'} min after the source was ready")
            else:
                against[PERFORMANCE].append(
                    f"{partition}: run took {results[DURATION].value_text if DURATION in results else '?'} and "
                    f"started {queue if queue is not None else '?'} min after the source was ready: "
                    "the platform was not slow")
    return {o: results[o].describe() for o in OBJECTIVES if o in results}


def served_version_findings(platform: Platform, day: str) -> dict[str, Any]:
    """What triage finds about the version consumers are served for ``day``, product by product.

    Each served certification is read back at its snapshot and held against
    what was certified (fingerprint, and controls where the product carries
    them), and the blocking checks of the run that certified it are looked
    up. ``wrong`` lists every way the served figures are not what was
    certified; empty, the served version is what its checks passed.
    """
    states = platform.ledger.partitions.states([day], CERTIFIED_ASSETS)
    served, wrong = {}, []
    for asset in CERTIFIED_ASSETS:
        version = states.served(asset, day)
        if version is None:
            continue
        cert = version.certification
        served[asset] = version.version
        spec = TABLES_BY_NAME[asset]
        try:
            fingerprint = fingerprints_of(platform.warehouse, spec, [day], cert.snapshot_id)[day]
            controls = (controls_of(platform.warehouse, spec, [day], cert.snapshot_id)[day]
                        if spec != METRIC_GROSS_REVENUE and cert.controls is not None else None)
        except Exception as exc:  # noqa: BLE001 - a served version that cannot be read back is wrong for consumers
            wrong.append(f"{asset} v{version.version} cannot be read back: {exc}")
            continue
        if controls is not None and controls != cert.controls:
            wrong.append(f"{asset} v{version.version} reads {controls}, certified {cert.controls}")
        elif fingerprint != cert.fingerprint:
            wrong.append(f"{asset} v{version.version} rows differ from the certified rows (fingerprint)")
        failed = sorted({f"{r['asset']}:{r['check_name']}" for r in platform.ledger.checks.results(
            run_id=cert.run_id, partition=day) if r["blocking"] and not r["passed"]})
        if failed:
            wrong.append(f"{asset} v{version.version} was certified by run {cert.run_id}, whose checks failed: "
                         + ", ".join(failed))
    return {"served": served, "wrong": wrong}


def describe_served(findings: dict[str, Any]) -> str:
    """One line: what the served version of a day is, and whether triage found its figures wrong."""
    if not findings["served"]:
        return "nothing is served"
    versions = "/".join(str(v) for v in sorted(set(findings["served"].values())))
    if findings["wrong"]:
        return f"served version {versions} is wrong: " + "; ".join(findings["wrong"])
    return f"served version {versions} reads back as certified, its checks passed"


def dashboard_findings(platform: Platform, dashboards: list[str], days: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each disputed dashboard against the governed metric, day by day: what it shows now and what its golden check said.

    The comparison is the golden check's own (every tile that presents the
    governed metric, from the certified consumer layer), computed now; the
    newest recorded golden check result of the dashboard and day is quoted
    beside it. ``{day: [{dashboard, matches, line, ...}]}``.
    """
    if not dashboards or not days:
        return {}
    golden = {}
    for r in platform.ledger.checks.results(partitions=days):
        if r["check_name"] == GOLDEN_MATCHES_GOVERNED_METRIC and r["asset"] in dashboards:
            golden[(r["asset"], r["partition"])] = r
    out: dict[str, list[dict[str, Any]]] = {day: [] for day in days}
    with certified_connection(platform) as con:
        governed = governed_values(platform, con=con)
        for asset in dashboards:
            dashboard = current(platform.ledger, asset)
            values = tile_values(platform, dashboard, con)
            for day in days:
                figure = governed.get(day)
                recorded = golden.get((asset, day))
                quoted = ("" if recorded is None else
                          f"; its golden check of {recorded['recorded_at']} {'passed' if recorded['passed'] else 'failed'}")
                if figure is None:
                    line = (f"{day}: {asset} shows nothing of the day: the governed metric is not served for it"
                            + quoted)
                    out[day].append({"dashboard": asset, "matches": None, "line": line})
                    continue
                differs = [(t, values[t.key].get(day)) for t in dashboard.governed_tiles
                           if values[t.key].get(day) != figure]
                if differs:
                    shown = ", ".join(f"{t.title} shows {'nothing' if v is None else format(v, 'f')}"
                                      for t, v in differs)
                    line = (f"{day}: {asset} (v{dashboard.version}): dashboard differs: {shown}, the governed metric is "
                            f"{format(figure, 'f')}" + quoted)
                else:
                    line = (f"{day}: {asset} (v{dashboard.version}): dashboard matches the governed metric "
                            f"({format(figure, 'f')})" + quoted)
                out[day].append({"dashboard": asset, "matches": not differs, "line": line,
                                 "governed": format(figure, "f"),
                                 "shown": {t.key: format(values[t.key][day], "f") for t in dashboard.governed_tiles
                                           if day in values[t.key]}})
    return out


def classify(platform: Platform, incident: Incident) -> dict[str, Any]:
    ledger = platform.ledger
    now = platform.clock.now()
    mechanisms: dict[str, list[str]] = {m: [] for m in MECHANISMS}
    against: dict[str, list[str]] = {m: [] for m in mechanisms}
    due: dict[str, dict[str, Any]] = {}
    slo: dict[str, dict[str, str]] = {}
    served: dict[str, str] = {}
    disputed = sorted({s["asset"] for s in incident.signals if s.get("asset") in DEFAULT_DASHBOARDS})
    dashboards = dashboard_findings(platform, disputed, incident.partitions)
    states = ledger.partitions.states(incident.partitions)  # the incident's days, one read
    for partition in incident.partitions:
        served[partition] = describe_served(served_version_findings(platform, partition))
        certified = states.all_served(CERTIFIED_ASSETS, partition)
        due[partition] = due_state(partition, now, certified)
        # the source is expected from its schedule plus the grace a healthy day needs (ready 08:04)
        expected_from = scheduled_at(partition) + SOURCE_LATE_GRACE
        source_expected = now >= expected_from

        # 1. source
        found_before = len(mechanisms[SOURCE])
        batches = ledger.batches.list(partition)
        if source_expected:
            blocked = states.get("raw_order_lines", partition).blocked
            for event in blocked:
                mechanisms[SOURCE].append(f"{partition}: run {event.run_id} blocked upstream at {event.recorded_at}: "
                                          + "; ".join(event.detail.get("problems", [])))
            first_certified = min((e.recorded_at for a in CERTIFIED_ASSETS
                                   for e in states.get(a, partition).certifications), default=None)
            for batch in batches:
                if first_certified is not None and batch["first_seen_at"] > first_certified:
                    # A re-send of a delivered day is measured against its own delivery, never
                    # against the day's first schedule (which it always "misses").
                    continue
                late = minutes_between(scheduled_at(partition), parse_ts(batch["ready_at"]))
                if late > SOURCE_LATE_GRACE.total_seconds() / 60:
                    mechanisms[SOURCE].append(
                        f"{partition}: batch {batch['batch_id']} ready_at {batch['ready_at']}, {late:g} min after the schedule")
            held = held_reason(platform, partition)
            if held:
                mechanisms[SOURCE].append(f"{partition}: a re-send of the source moves certified figures: {held}")
            if not batches:
                mechanisms[SOURCE].append(f"{partition}: no batch of this day has arrived (counts absent); "
                                          f"{due[partition]['detail']}")
            if len(mechanisms[SOURCE]) == found_before:
                against[SOURCE].append(f"{partition}: batches arrived on time and passed readiness")
        else:
            against[SOURCE].append(f"{partition}: the source is not expected before {format_ts(expected_from)} "
                                   f"(schedule + {SOURCE_LATE_GRACE.total_seconds() / 60:g} min): nothing is late yet")

        # A held anomaly is evidence whenever it happened: the batch arrived and was judged.
        anomaly = anomaly_reasons(platform, [partition]).get(partition)
        if anomaly and anomaly.startswith(ANOMALY_HELD):
            mechanisms[SOURCE].append(f"{partition}: source anomaly: the day is far from its certified history "
                                      f"although every rule accepts it: {anomaly}")

        # 2. pipeline / schema, 3. semantic
        latest = _latest_checks(platform, partition)
        pipeline_failed = [r for (asset, check), r in latest.items()
                           if r["blocking"] and not r["passed"]]
        for r in pipeline_failed:
            what = {
                SOURCE_CONTRACT_CONFORMS: "contract violation: the source's field layout changed",
                QUALITY_WITHIN_THRESHOLDS: "the source's values broke the contract's type or value rules in bulk "
                                           "(a whole column failing its type is a schema change)",
            }.get(r["check_name"], "mismatch between layers")
            mechanisms[PIPELINE].append(
                f"{partition}: {r['asset']}:{r['check_name']} failed ({what}); observed {r['observed']}, expected {r['expected']}")
        golden_failed = [r for (asset, check), r in latest.items()
                         if check == GOLDEN_MATCHES_GOVERNED_METRIC and not r["passed"]]
        pipeline_green = bool(latest) and not pipeline_failed and any(r["blocking"] for r in latest.values())
        if pipeline_green:
            against[PIPELINE].append(f"{partition}: every pipeline check passed ({sum(1 for r in latest.values() if r['blocking'])} checks)")
        for r in golden_failed:
            if pipeline_green:
                mechanisms[SEMANTIC].append(
                    f"{partition}: {r['asset']} shows {r['observed']} but the governed metric is {r['expected']}, "
                    "while every pipeline check passed")
            else:
                against[SEMANTIC].append(f"{partition}: a consumer figure disagrees, but the pipeline itself is failing")
        golden_named = {r["asset"] for r in golden_failed}
        for finding in dashboards.get(partition, []):
            if finding["matches"]:
                against[SEMANTIC].append(finding["line"])
            elif finding["matches"] is None or finding["dashboard"] in golden_named:
                continue  # nothing to compare, or the failed golden check above already says it
            elif pipeline_green:
                mechanisms[SEMANTIC].append(finding["line"] + ", while every pipeline check passed")
            else:
                against[SEMANTIC].append(finding["line"] + ", but the pipeline itself is failing")

        # 4. performance, and every other SLO objective of the day
        slo[partition] = _slo_evidence(platform, partition, pipeline_green, mechanisms, against)

    holding = [m for m in MECHANISMS if mechanisms[m]]
    not_due = [p for p, d in due.items() if d["state"] == "not due yet"]
    if holding:
        verdict = holding[0]
        note = (f"several causes hold: {', '.join(holding)}; the first in triage order leads" if len(holding) > 1
                else f"only {verdict} holds")
    elif due and len(not_due) == len(due):
        verdict, holding = NOT_DUE, [NOT_DUE]
        note = ("nothing is wrong yet: " + "; ".join(f"{p} is due {due[p]['due_at']}" for p in not_due)
                + "; tell the consumer when it is due")
    else:
        verdict = UNKNOWN
        note = "no mechanism is supported by the evidence yet"
    if not_due and verdict != NOT_DUE:
        note += f"; not due yet: {', '.join(not_due)}"
    return {
        "verdict": verdict,
        "holding": holding,
        "note": note,
        "evidence": {m: mechanisms[m] for m in mechanisms},
        "against": {m: against[m] for m in against if against[m]},
        "due": due,
        "slo": slo,
        "served": served,
        "dashboards": {day: [f["line"] for f in found] for day, found in dashboards.items() if found},
    }
