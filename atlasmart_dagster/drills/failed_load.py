"""Drill: a failed daily load, handled the way a careful operator would.

Scenario for the current day 2026-09-21 (due 2026-09-22 08:00 UTC), on
logical time against real Dagster runs in a scratch home:

1. History 2026-09-17..20 is loaded and certified (backfill lane).
2. 08:00 the schedule fires; the manifest has not landed: the run records
   BLOCKED_UPSTREAM, publishes nothing, runs nothing downstream. Consumers see
   the day DELAYED and keep the certified history.
3. The manifest lands; the sensor starts the load in the current lane. A
   transient failure is injected into fact_sales; the retry policy recovers
   and the day is published once.
4. The certification gate certifies after the run; the SLOs are measured.
5. Historical repair: agg_daily_sales for 2026-09-20 is corrupted (cost
   +10 USD); reconciliation against fact_sales detects it; only that day is
   rebuilt from the aggregate down, in the backfill lane; it is re-certified
   and 2026-09-21 keeps its fingerprint.
6. Replay: 2026-09-20 is rebuilt from its immutable raw batch (the landing
   copy is gone) and every layer's fingerprint and the fact Parquet bytes are
   unchanged.

The same load is replayed on a second timeline where the manifest is ready
only at 08:12, to show the SLO figures move with the source.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dagster as dg

from ..domain.check_names import AGG_MATCHES_FACT
from ..domain.controls import ControlTuple
from ..ops.runs.backfills import BackfillRequest, run_backfill
from ..ops.runs.chains import run_checks
from ..product.lanes import LANE_TAG
from ..product.published_controls import controls_of, fingerprints_of
from ..product.serving import partition_status
from ..product.slo import latest_results
from ..store.clock import RUN_FINISHED, RUN_STARTED, minutes_between, parse_ts
from ..store.ledger.partition_states import BLOCKED_UPSTREAM, CERTIFIED
from ..store.tables import (
    AGG_DAILY_SALES,
    FACT_SALES,
    MART_EXECUTIVE_REVENUE,
    MART_FINANCE_DAILY_SALES,
    METRIC_GROSS_REVENUE,
    STG_ORDER_LINES,
)
from .faults import INJECT_TRANSIENT_TAG, corrupt_aggregate_cost, transient_faults_by_tag
from .harness import DrillWorld, hhmm, write_json

DAY = "2026-09-21"
NEXT = "2026-09-22"
HISTORY = ["2026-09-17", "2026-09-18", "2026-09-19", "2026-09-20"]
REPAIR_DAY = "2026-09-20"
INCIDENT = "DRILL-FAILED-LOAD"
CERTIFIED_SPECS = (METRIC_GROSS_REVENUE, MART_FINANCE_DAILY_SALES, MART_EXECUTIVE_REVENUE)
ALL_LAYERS = (STG_ORDER_LINES, FACT_SALES, AGG_DAILY_SALES, *CERTIFIED_SPECS)
SCHEDULED = "08:00"  # when the drill fires the daily schedule (D+1)
CORRUPTION_USD = 10  # the cost error injected into agg_daily_sales for REPAIR_DAY
COMPLETE_PCT = 100  # the scripted batches lose no row


@dataclass(frozen=True)
class Timeline:
    name: str
    ready: str
    start: str
    finish: str
    certify: str

    def ts(self, hm: str) -> str:
        return f"{NEXT}T{hm}:00Z"

    def minutes(self, start: str, end: str) -> float:
        return minutes_between(parse_ts(self.ts(start)), parse_ts(self.ts(end)))

    def expected_slo(self) -> dict[str, float]:
        """The SLO figures this script implies, from its own times (not from the SLO code)."""
        return {
            "freshness": self.minutes(self.ready, self.certify),
            "completeness": COMPLETE_PCT,
            "duration": self.minutes(self.start, self.finish),
            "availability": self.minutes(SCHEDULED, self.certify),
        }


HEALTHY = Timeline("healthy", ready="08:04", start="08:05", finish="08:12", certify="08:16")
LATE_MANIFEST = Timeline("late_manifest", ready="08:12", start="08:13", finish="08:17", certify="08:18")


def _fact_bytes(world: DrillWorld, partition: str) -> list[str]:
    return sorted(
        hashlib.sha256(Path(f).read_bytes()).hexdigest()
        for f in world.platform.warehouse.data_files(FACT_SALES, [partition])
    )


def _served_fingerprints(world: DrillWorld, partition: str) -> dict[str, str]:
    out = {}
    states = world.platform.ledger.partitions.states([partition])
    for spec in CERTIFIED_SPECS:
        served = states.served(spec.name, partition)
        out[spec.name] = served.certification.fingerprint if served else None
    return out


def _day_fingerprints(world: DrillWorld, day: str) -> dict[str, str]:
    """What consumers are served for ``day`` and every layer's current fingerprint of it."""
    wh = world.platform.warehouse
    return {**_served_fingerprints(world, day),
            **{f"{s.name}@current": fingerprints_of(wh, s, [day])[day] for s in ALL_LAYERS}}


def _slo_json(results) -> dict[str, Any]:
    return {
        r.objective: {"value": r.value, "unit": r.unit, "target": r.target, "met": r.met, "missed_by": r.missed_by}
        for r in results
    }


def play_daily_load(world: DrillWorld, timeline: Timeline) -> dict[str, Any]:
    """Steps 1-4 on one timeline; returns the scenario's evidence."""
    world.withhold_manifest(DAY)
    world.at(f"{NEXT}T06:00:00Z")
    history = world.run("history load", HISTORY, lane="backfill")
    world.certify(history)
    world.signal("setup", f"history {HISTORY[0]}..{HISTORY[-1]} loaded and certified in the backfill lane")

    # 2. the clock fires before the source is ready
    world.at(timeline.ts(SCHEDULED))
    request = world.tick_schedule()
    blocked = world.execute("scheduled load (manifest not landed)", request)
    blocked_event = world.platform.ledger.partitions.states([DAY]).events((BLOCKED_UPSTREAM,))[-1]
    status = partition_status(world.platform, DAY)
    world.signal(
        "blocked",
        f"schedule fired for {DAY}: BLOCKED_UPSTREAM, nothing published ({'; '.join(blocked_event.detail['problems'])})",
        consumer_state=status.state,
    )
    served_history = {p: partition_status(world.platform, p).state for p in HISTORY}

    # the sensor waits and says why
    world.at(f"{NEXT}T08:02:00Z")
    _, skipped = world.tick_sensor()
    waiting = next(s for s in skipped if s.startswith(DAY))
    world.signal("sensor_skip", f"landing_manifest_sensor skipped: {waiting}")

    # 3. the manifest lands; the sensor starts the load; a transient failure is retried
    world.at(timeline.ts(timeline.ready))
    world.land_manifest(DAY, ready_at=timeline.ts(timeline.ready))
    world.signal("manifest_landed", f"manifest for {DAY} landed, ready_at {timeline.ready}")
    world.at(
        timeline.ts(timeline.start),
        phases={RUN_STARTED: timeline.ts(timeline.start), RUN_FINISHED: timeline.ts(timeline.finish)},
    )
    load_request, load = world.load_from_sensor("sensor-triggered load", DAY, extra_tags={INJECT_TRANSIENT_TAG: "fact_sales"})
    # the clock does not move during the run: the signal carries the request's time
    world.signal("sensor_request", f"landing_manifest_sensor requested the load of {DAY} in the {load_request.tags[LANE_TAG]} lane")
    fact_events = next(r for r in world.runs if r["run_id"] == load.run_id)["step_events"]["fact_sales"]
    retried = "STEP_UP_FOR_RETRY" in fact_events and fact_events[-1] == "STEP_SUCCESS"
    world.signal("retry", "fact_sales attempt 1 failed (transient, injected); retried under the retry policy; succeeded",
                 events=fact_events)
    world.at(timeline.ts(timeline.finish))
    world.signal("load_finished", f"load run finished ({'success' if load.success else 'failed'})")

    # 4. certification after the run, SLOs measured
    world.at(timeline.ts(timeline.certify))
    decisions = world.certify(load)
    slo = latest_results(world.platform.ledger, DAY)
    day_states = world.platform.ledger.partitions.states([DAY])
    controls = day_states.served(MART_FINANCE_DAILY_SALES.name, DAY).certification.controls
    world.signal("certified", f"{DAY} certified v1, controls {controls}", assets=sorted(d.asset for d in decisions if d.certified))
    world.signal("slo", "; ".join(r.describe() for r in slo))
    published_once = sum(1 for e in day_states.events(asset="fact_sales") if e.run_id == load.run_id)
    return {
        "timeline": {"ready_at": timeline.ready, "run_started": timeline.start, "run_finished": timeline.finish,
                     "certified": timeline.certify, "scheduled": SCHEDULED},
        "slo": _slo_json(slo),
        "slo_all_met": all(r.met for r in slo),
        "blocked_run": {
            "state": BLOCKED_UPSTREAM,
            "problems": blocked_event.detail["problems"],
            "materialized_assets": sorted(
                {e.asset_key.to_user_string() for e in blocked.result.get_asset_materialization_events()}
            ),
            "consumer_state": status.state,
            "history_still_served": served_history,
        },
        "sensor": {"skipped": waiting, "requested_lane": load_request.tags[LANE_TAG]},
        "retry": {"step": "fact_sales", "events": fact_events, "recovered": retried, "fact_publications": published_once},
        "certified": {"partition": DAY, "controls": str(controls), "assets": sorted(d.asset for d in decisions if d.certified)},
    }


def play_historical_repair(world: DrillWorld) -> tuple[dict[str, Any], ControlTuple]:
    """Step 5: corrupt, detect by reconciliation, repair the smallest scope, re-certify.

    Returns the evidence and the aggregate's controls as recorded before the corruption.
    """
    wh = world.platform.warehouse
    world.at(f"{NEXT}T09:00:00Z")
    neighbour_before = _day_fingerprints(world, DAY)
    recorded = controls_of(wh, AGG_DAILY_SALES, [REPAIR_DAY])[REPAIR_DAY]
    corrupt_aggregate_cost(world.platform, REPAIR_DAY, +CORRUPTION_USD)
    corrupted = controls_of(wh, AGG_DAILY_SALES, [REPAIR_DAY])[REPAIR_DAY]
    world.signal("fault", f"agg_daily_sales {REPAIR_DAY} published with cost {CORRUPTION_USD:+d} USD: {corrupted}")

    world.at(f"{NEXT}T09:02:00Z")
    check_key = dg.AssetCheckKey(dg.AssetKey(AGG_DAILY_SALES.name), AGG_MATCHES_FACT)
    detection = run_checks(
        world.defs, world.instance, [check_key], REPAIR_DAY, tags={"atlasmart/purpose": "reconciliation"},
        log_level=world.log_level,
    )
    (evaluation,) = detection.get_asset_check_evaluations()
    shown = evaluation.metadata["observed_vs_expected"].value[REPAIR_DAY]
    world.runs.append({"label": "reconciliation check", "run_id": detection.run_id, "partitions": [REPAIR_DAY],
                       "lane": "backfill", "success": detection.success, "failures": [], "step_events": {}})
    world.signal("detected", f"{AGG_DAILY_SALES.name}:{AGG_MATCHES_FACT} failed for {REPAIR_DAY}: "
                 f"observed cost {shown['observed']['cost_usd']}, fact_sales says {shown['expected']['cost_usd']}")

    world.at(f"{NEXT}T09:05:00Z")
    request = BackfillRequest(
        start=REPAIR_DAY, end=REPAIR_DAY, operator="on-call data engineer (drill)",
        reason=f"agg_daily_sales cost corrupted by {CORRUPTION_USD:+d} USD; rebuild from fact_sales (source of truth)",
        incident_id=INCIDENT, start_at=AGG_DAILY_SALES.name,
    )
    repair = run_backfill(world.defs, world.instance, world.platform, request, log_level=world.log_level)
    world.record_run("historical repair (backfill lane)", repair)
    repaired = controls_of(wh, AGG_DAILY_SALES, [REPAIR_DAY])[REPAIR_DAY]
    recert = [e for e in world.platform.ledger.partitions.states([REPAIR_DAY]).events((CERTIFIED,)) if e.run_id == repair.run_id]
    neighbour_after = _day_fingerprints(world, DAY)
    rebuilt = sorted(k for k, v in next(r for r in world.runs if r["run_id"] == repair.run_id)["step_events"].items()
                     if "ASSET_MATERIALIZATION" in v)
    world.signal("repaired", f"{REPAIR_DAY} rebuilt from {AGG_DAILY_SALES.name} down in the backfill lane: {repaired}; "
                 f"re-certified ({len(recert)} products); {DAY} fingerprints unchanged: {neighbour_before == neighbour_after}")
    evidence = {
        "partition": REPAIR_DAY,
        "corrupted_controls": str(corrupted),
        "detected_by": f"{AGG_DAILY_SALES.name}:{AGG_MATCHES_FACT}",
        "observed": shown["observed"],
        "expected": shown["expected"],
        "repair_scope": rebuilt,
        "repair_lane": repair.lane,
        "repair_request": {"operator": request.operator, "reason": request.reason, "incident": request.incident_id},
        "repaired_controls": str(repaired),
        "recertified_assets": sorted(e.asset for e in recert),
        "neighbour_fingerprints_unchanged": neighbour_before == neighbour_after,
        "facts_untouched": "fact_sales" not in rebuilt,
    }
    return evidence, recorded


def play_replay(world: DrillWorld) -> dict[str, Any]:
    """Step 6: rebuild a day from its immutable raw batch; nothing may change."""
    wh = world.platform.warehouse
    world.at(f"{NEXT}T09:30:00Z")
    before = {s.name: fingerprints_of(wh, s, [REPAIR_DAY])[REPAIR_DAY] for s in ALL_LAYERS}
    bytes_before = _fact_bytes(world, REPAIR_DAY)
    shutil.rmtree(world.day_dir(REPAIR_DAY))  # landing retention expired: only the raw store has it
    request = BackfillRequest(start=REPAIR_DAY, end=REPAIR_DAY, operator="on-call data engineer (drill)",
                              reason="replay determinism check from the raw store", incident_id=INCIDENT)
    replay = run_backfill(world.defs, world.instance, world.platform, request, log_level=world.log_level)
    world.record_run("replay from raw store (backfill lane)", replay)
    after = {s.name: fingerprints_of(wh, s, [REPAIR_DAY])[REPAIR_DAY] for s in ALL_LAYERS}
    bytes_identical = bytes_before == _fact_bytes(world, REPAIR_DAY)
    raw_built = world.platform.ledger.partitions.states([REPAIR_DAY]).events(asset="raw_order_lines")[-1]
    world.signal("replayed", f"{REPAIR_DAY} replayed from the raw store: fingerprints identical {before == after}, "
                 f"fact Parquet bytes identical {bytes_identical}")
    return {
        "partition": REPAIR_DAY,
        "source": "raw store" if raw_built.run_id == replay.run_id else "unknown",
        "batch_ids": raw_built.detail.get("batch_ids"),
        "fingerprints": after,
        "fingerprints_identical": before == after,
        "fact_parquet_bytes_identical": bytes_identical,
        "status": partition_status(world.platform, REPAIR_DAY).state,
    }


def run_drill(workdir: Path, ephemeral_instance: bool = False, log_level: str | None = "CRITICAL") -> dict[str, Any]:
    """Play both timelines; write the evidence under ``workdir/artifacts``; return the summary."""
    workdir = Path(workdir)
    healthy_world = DrillWorld(workdir / "healthy", ephemeral_instance, log_level)
    late_world = DrillWorld(workdir / "late_manifest", ephemeral_instance, log_level)
    with transient_faults_by_tag():  # each sensor-triggered load asks for a transient fact_sales failure
        healthy = play_daily_load(healthy_world, HEALTHY)
        late = play_daily_load(late_world, LATE_MANIFEST)
    repair, recorded = play_historical_repair(healthy_world)
    replay = play_replay(healthy_world)

    expected, expected_late = HEALTHY.expected_slo(), LATE_MANIFEST.expected_slo()
    # the fault moves cost up and profit down by the same amount; the repair must restore what was recorded
    expected_corrupted = replace(recorded, cost_usd=recorded.cost_usd + CORRUPTION_USD,
                                 gross_profit_usd=recorded.gross_profit_usd - CORRUPTION_USD)
    acceptance = {
        "blocked_run_published_nothing": healthy["blocked_run"]["materialized_assets"] == [],
        "blocked_day_delayed_history_served": healthy["blocked_run"]["consumer_state"] == "DELAYED"
        and set(healthy["blocked_run"]["history_still_served"].values()) == {CERTIFIED},
        "transient_failure_retried_and_published_once": healthy["retry"]["recovered"]
        and healthy["retry"]["fact_publications"] == 1,
        "healthy_slo_figures": {k: v["value"] for k, v in healthy["slo"].items()} == expected and healthy["slo_all_met"],
        "late_manifest_slo_figures": late["slo"]["freshness"]["value"] == expected_late["freshness"]
        and late["slo"]["availability"]["value"] == expected_late["availability"],
        "repair_detected_by_reconciliation": repair["corrupted_controls"] == str(expected_corrupted),
        "repair_restored_controls": repair["repaired_controls"] == str(recorded),
        "repair_smallest_scope_in_backfill_lane": repair["facts_untouched"] and repair["repair_lane"] == "backfill",
        "repair_recertified": len(repair["recertified_assets"]) == 3,
        "current_day_fingerprint_unchanged": repair["neighbour_fingerprints_unchanged"],
        "replay_deterministic": replay["fingerprints_identical"] and replay["fact_parquet_bytes_identical"],
    }
    summary = {
        "drill": "failed-load",
        "partition": DAY,
        "healthy": healthy,
        "late_manifest": late,
        "historical_repair": repair,
        "replay": replay,
        "acceptance": acceptance,
        "passed": all(acceptance.values()),
    }
    artifacts = workdir / "artifacts"
    write_json(artifacts / "acceptance_summary.json", summary)
    write_json(artifacts / "evidence" / "runs.json", {"healthy": healthy_world.runs, "late_manifest": late_world.runs})
    write_json(artifacts / "evidence" / "signals.json",
               {"healthy": [s.to_json() for s in healthy_world.signals], "late_manifest": [s.to_json() for s in late_world.signals]})
    write_json(artifacts / "evidence" / "ledger.json", healthy_world.ledger_excerpt(HISTORY + [DAY]))
    (artifacts / "operator_notes.md").write_text(operator_notes(summary, healthy_world, late_world))
    (artifacts / "runbook.md").write_text(runbook(summary))
    summary["_signals_text"] = signals_text(healthy_world, late_world)
    return summary


def signals_text(healthy: DrillWorld, late: DrillWorld) -> str:
    lines = [f"Timeline: healthy source (manifest ready {HEALTHY.ready})"]
    lines += [f"  {hhmm(s.at)}  {s.kind:<15} {s.message}" for s in healthy.signals]
    lines += ["", f"Timeline: late manifest (ready {LATE_MANIFEST.ready})"]
    lines += [f"  {hhmm(s.at)}  {s.kind:<15} {s.message}" for s in late.signals if s.kind != "setup"]
    return "\n".join(lines)


def operator_notes(summary: dict, healthy: DrillWorld, late: DrillWorld) -> str:
    h, l, r, p = summary["healthy"], summary["late_manifest"], summary["historical_repair"], summary["replay"]
    slo = lambda s: ", ".join(f"{k} {v['value']:g} {v['unit']} ({'met' if v['met'] else 'missed by %g' % v['missed_by']})" for k, v in s.items())
    return f"""# Operator notes: failed daily load drill ({DAY})

All times UTC on logical time; every run below is a real Dagster run (see evidence/runs.json).

## What happened
- {h['timeline']['scheduled']} the daily schedule fired for {DAY}. The ERP manifest was not there:
  the load recorded BLOCKED_UPSTREAM ({'; '.join(h['blocked_run']['problems'])}),
  published nothing (materialized: {h['blocked_run']['materialized_assets'] or 'none'}) and ran nothing downstream.
  Consumers saw {DAY} as {h['blocked_run']['consumer_state']}; {', '.join(h['blocked_run']['history_still_served'])} stayed certified and served.
- 08:02 the manifest sensor said why it waited: "{h['sensor']['skipped']}".
- {h['timeline']['ready_at']} the manifest landed. At {h['timeline']['run_started']} the sensor started the load in the {h['sensor']['requested_lane']} lane.
  fact_sales failed once with an injected transient error and was retried by the policy
  (events: {' -> '.join(h['retry']['events'])}); the day was published once.
- {h['timeline']['certified']} the certification gate certified {DAY}: {h['certified']['controls']}.
  SLOs: {slo(h['slo'])}.

## Historical repair
- agg_daily_sales {r['partition']} was published with cost {CORRUPTION_USD:+d} USD: {r['corrupted_controls']}.
- Detected by {r['detected_by']}: observed cost {r['observed']['cost_usd']} vs {r['expected']['cost_usd']} from fact_sales.
- Repaired by rebuilding only {r['partition']} from agg_daily_sales down ({', '.join(r['repair_scope'])}) in the {r['repair_lane']} lane,
  requested by {r['repair_request']['operator']} for {r['repair_request']['incident']}: {r['repaired_controls']}.
  Facts were not edited. Re-certified: {', '.join(r['recertified_assets'])}. {DAY} fingerprints unchanged: {r['neighbour_fingerprints_unchanged']}.

## Replay
- {p['partition']} rebuilt from the raw store (batches {', '.join(p['batch_ids'] or [])}) after the landing copy was removed:
  fingerprints identical {p['fingerprints_identical']}, fact Parquet bytes identical {p['fact_parquet_bytes_identical']}.

## Late manifest timeline
- Manifest ready {l['timeline']['ready_at']}, load {l['timeline']['run_started']}-{l['timeline']['run_finished']}, certified {l['timeline']['certified']}.
  SLOs: {slo(l['slo'])}.

Acceptance: {'PASSED' if summary['passed'] else 'FAILED'} ({sum(summary['acceptance'].values())}/{len(summary['acceptance'])} criteria).
"""


def runbook(summary: dict) -> str:
    r = summary["historical_repair"]
    return f"""# Runbook: the daily sales load is late or wrong

Generated by `atlasmart drill failed-load` from a drill that exercised every step below.

## 1. Is the source ready?
`atlasmart status --partition D` shows `DELAYED` with "blocked upstream" when a run found the
manifest missing or untruthful. Consumers keep the last certified days; the day reads as absent.
Nothing to repair: the `landing_manifest_sensor` starts the load when the manifest lands
(its skip reason in the UI says what it waits for). Escalate to ERP operations when the
availability deadline (D+1 08:30) is at risk.

## 2. Did the load fail?
Open the run in the UI. `STEP_UP_FOR_RETRY` / `STEP_RESTARTED` are transient failures the
retry policy handled. A failure with `retryable: false` metadata is permanent (bad data,
contract violation, raw evidence conflict): do not re-run blindly; read the description.
The previous certified version stays served.

## 3. Is a published day wrong?
Run the reconciliation checks for the day (asset *Checks* tab, or
`dagster asset materialize` with the check selected). A failed check shows observed vs
expected. Example from the drill: {r['detected_by']} observed cost {r['observed']['cost_usd']}
against {r['expected']['cost_usd']}.

## 4. Repair the smallest scope, in the backfill lane
Never edit facts to match. Rebuild from the first wrong layer down, for the affected days only:

    atlasmart backfill --from {r['partition']} --to {r['partition']} --start-at agg_daily_sales \\
        --operator "<you>" --reason "<what was wrong>" --incident <INC-id>

The backfill lane refuses the current day unless `--include-current` is given, runs the
range as one run, and records who/why in the ledger.

## 5. Prove the repair
The certification gate re-certifies only when the whole chain reconciles. Check
`atlasmart status --partition D` (new certification, same or restated version) and
`atlasmart controls --asset mart_finance_daily_sales --partition D`. Neighbouring days
must keep their fingerprints.

## 6. Replay if in doubt
`atlasmart backfill --from D --to D --operator ... --reason "replay"` rebuilds the day
from the immutable raw store; fingerprints must not change.
"""
