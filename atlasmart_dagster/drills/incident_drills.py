"""Incident drills: source lateness, schema drift, semantic bug, anomaly hold, end to end on logical time.

Each drill starts from a fresh scratch home with certified history, breaks
one thing the way it breaks in real life, and walks the whole incident
workflow through real Dagster runs: detection by the incident sensor's logic,
triage from evidence, blast radius from the live asset graph, containment,
consumer notices, a scoped repair, verification against controls recomputed
from raw, re-certification, resolution and a postmortem with owned actions.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

from ..defs.checks.certification_checks import report_day_states
from ..domain.controls import ControlTuple, format_money, total
from ..ops.response.incidents.detection import detect
from ..store.ledger.incidents import Incident
from ..ops.response.incidents.workflow import IncidentWorkflow
from ..ops.runs.chains import run_golden_checks
from ..product.anomaly import ANOMALY_HELD, reject_anomaly
from ..product.batch_lifecycle import retired_batches
from ..product.canonical_controls import canonical_controls
from ..product.contract_approvals import approvals, approve
from ..product.dashboards import EXECUTIVE_DASHBOARD, Dashboard, Tile, current, deploy, governed_values, tile_values
from ..product.lanes import INCLUDE_CURRENT_TAG
from ..product.published_controls import controls_of
from ..product.serving import partition_status, read_certified
from ..product.slo import due_at, latest_results
from ..store.clock import RUN_FINISHED, RUN_STARTED, minutes_between, parse_ts
from ..store.home import sample_dir
from ..store.ledger.partition_states import CERTIFIED
from ..store.platform import Platform
from ..store.tables import (
    CERTIFIED_ASSETS,
    FACT_SALES,
    MART_EXECUTIVE_REVENUE,
    MART_FINANCE_DAILY_SALES,
    METRIC_GROSS_REVENUE,
    STG_ORDER_LINES,
)
from .faults import drift_rename_field
from .harness import DrillWorld, hhmm, write_json

DAY = "2026-09-21"
NEXT = "2026-09-22"
ALL_DAYS = ["2026-09-17", "2026-09-18", "2026-09-19", "2026-09-20", "2026-09-21"]
ONCALL = "oncall@atlasmart.example"  # a human principal holding incident_responder


def at(hm: str) -> str:
    return f"{NEXT}T{hm}:00Z"


def canonical_total(platform: Platform) -> ControlTuple:
    """Controls of every drill day recomputed from raw, independent of every published layer."""
    return total(canonical_controls(platform, ALL_DAYS).values())


def served_total(platform: Platform) -> ControlTuple:
    """Controls of what consumers are served: the certified finance mart, over every drill day."""
    states = platform.ledger.partitions.states(ALL_DAYS, [MART_FINANCE_DAILY_SALES.name])
    served = [states.served(MART_FINANCE_DAILY_SALES.name, d) for d in ALL_DAYS]
    return total(s.certification.controls for s in served if s and s.certification.controls)


def fact_total(platform: Platform) -> ControlTuple:
    return total(controls_of(platform.warehouse, FACT_SALES, ALL_DAYS).values())


def totals_reconcile(platform: Platform) -> bool:
    """Raw evidence, the facts and what consumers are served agree (and are not empty)."""
    canonical = canonical_total(platform)
    return canonical != ControlTuple() and canonical == fact_total(platform) == served_total(platform)


def certified_at(platform: Platform, partition: str) -> str:
    """HH:MM of the certification consumers are served for ``partition``."""
    states = platform.ledger.partitions.states([partition], [MART_FINANCE_DAILY_SALES.name])
    return hhmm(states.served(MART_FINANCE_DAILY_SALES.name, partition).certification.recorded_at)


def certified_marketplace_revenue(platform: Platform) -> Decimal:
    """Marketplace revenue of every drill day, as the certified executive mart serves it."""
    table = read_certified(platform, MART_EXECUTIVE_REVENUE.name, ALL_DAYS)
    return sum((Decimal(str(v)) for v in table.column("revenue_marketplace_usd").to_pylist()), Decimal("0.00"))


class IncidentDrill:
    """Shared moves of the incident drills."""

    name = "incident"

    def __init__(self, workdir: Path, ephemeral_instance: bool = False, log_level: str | None = "CRITICAL"):
        self.workdir = Path(workdir)
        self.world = DrillWorld(self.workdir / "world", ephemeral_instance, log_level)
        self.wf = IncidentWorkflow(self.world.platform, self.world.defs, self.world.instance, log_level)
        self.notices_dir = self.workdir / "artifacts" / "notices"

    # -- setup --------------------------------------------------------------
    def certified_history(self, days: list[str], when: str = "06:00") -> None:
        w = self.world
        w.at(at(when))
        # the setup names the current day explicitly when it loads it with the history
        tags = {INCLUDE_CURRENT_TAG: "true"} if DAY in days else {}
        history = w.run("history load", days, lane="backfill", tags=tags)
        w.certify(history)
        self.golden_checks("golden checks after history load")
        w.signal("setup", f"history {days[0]}..{days[-1]} loaded and certified; dashboards golden-checked")

    def golden_checks(self, label: str) -> str:
        """Run the dashboards' golden checks (and certify what they cleared); returns the run id."""
        w = self.world
        result, _ = run_golden_checks(w.defs, w.instance, w.platform, "certification_sensor", w.log_level)
        w.runs.append({"label": label, "run_id": result.run_id, "partitions": [], "lane": None,
                       "success": result.success, "failures": [], "step_events": {}})
        return result.run_id

    def detect(self) -> list[str]:
        touched = detect(self.world.platform, self.world.instance)
        for incident_id in touched:
            incident = self.wf.get(incident_id)
            self.world.signal("detected", f"incident_sensor: {incident_id} [{incident.status}] {incident.title}; "
                                          f"signals: {len(incident.signals)}")
        return touched

    def notify(self, incident_id: str, **kwargs) -> dict:
        notice = self.wf.notify(incident_id, ONCALL, out_dir=self.notices_dir, **kwargs)
        self.world.signal("notice", f"consumer notice ({notice['stage']}): data is {notice['impact']} for "
                                    f"{', '.join(notice['affected_days'])}; restated: {notice['figures_will_be_restated']}")
        return notice

    def triage(self, incident_id: str, **origin) -> dict:
        result = self.wf.identify(incident_id, ONCALL, **origin)
        t, br = result["triage"], result["blast_radius"]
        self.world.signal("triage", f"verdict: {t['verdict']} ({t['note']})")
        self.world.signal("blast_radius", f"from {br.origin}: marts {', '.join(a.asset for a in br.of_kind('certified mart')) or '-'}; "
                                          f"dashboards {', '.join(a.asset for a in br.of_kind('dashboard')) or '-'}; "
                                          f"consumer groups {', '.join(a.asset for a in br.of_kind('consumer group')) or '-'}")
        return result

    def postmortem(self, incident_id: str, owner: str, due: str, gap: str, verification: str) -> str:
        action = self.wf.add_action(incident_id, ONCALL, owner, due, gap, verification)
        self.world.signal("postmortem", f"{action}: {owner} by {due}: {gap}")
        return action

    # -- evidence -----------------------------------------------------------
    def finish(self, incident_id: str, figures: dict[str, Any], acceptance: dict[str, bool]) -> dict[str, Any]:
        incident = self.wf.get(incident_id)
        totals = canonical_total(self.world.platform)
        summary = {
            "drill": self.name,
            "incident": incident.id,
            "status": incident.status,
            "incident_fingerprint": incident.fingerprint(),
            "triage": incident.latest("triage")["data"],
            "blast_radius": {k: v for k, v in incident.latest("blast_radius")["data"].items() if k != "mermaid"},
            "notices": [{k: v for k, v in n.items() if k != "markdown"} for n in (e["data"] for e in incident.of_kind("notice"))],
            "postmortem_actions": incident.to_json()["postmortem_actions"],
            "controls_total_after": str(totals),
            "states_after": {d: partition_status(self.world.platform, d).state for d in ALL_DAYS},
            **figures,
            "acceptance": acceptance,
            "passed": all(acceptance.values()),
        }
        artifacts = self.workdir / "artifacts"
        write_json(artifacts / "acceptance_summary.json", summary)
        write_json(artifacts / "incident.json", incident.to_json() | {"fingerprint": incident.fingerprint()})
        write_json(artifacts / "evidence" / "runs.json", self.world.runs)
        write_json(artifacts / "evidence" / "signals.json", [s.to_json() for s in self.world.signals])
        write_json(artifacts / "evidence" / "ledger.json", self.world.ledger_excerpt(ALL_DAYS))
        (artifacts / "blast_radius.mmd").write_text(incident.latest("blast_radius")["data"]["mermaid"] + "\n")
        (artifacts / "postmortem.md").write_text(postmortem_markdown(incident, summary))
        summary["_text"] = self.render(incident, summary)
        return summary

    def render(self, incident: Incident, summary: dict[str, Any]) -> str:
        lines = [f"Drill {self.name}: {incident.id} {incident.title}", "", "Timeline:"]
        lines += [f"  {hhmm(s.at)}  {s.kind:<13} {s.message}" for s in self.world.signals]
        t = summary["triage"]
        lines += ["", f"Classification: {t['verdict']} ({t['note']})"]
        for mechanism, evidence in t["evidence"].items():
            lines += [f"  + {mechanism}: {e}" for e in evidence]
        for mechanism, evidence in t.get("against", {}).items():
            lines += [f"  - {mechanism}: {e}" for e in evidence]
        br = summary["blast_radius"]
        lines += ["", f"Blast radius from {br['origin']}:"]
        lines += [f"  {a['kind']:<16} {a['asset']}{' [' + ', '.join(a['columns']) + ']' if a['columns'] else ''}"
                  f"  owners: {', '.join(a['owners'])}" for a in br["assets"]]
        lines += ["", "Notices:"]
        lines += [f"  ({n['stage']}) {n['impact']}: {n['summary']}" for n in summary["notices"]]
        lines += ["", "Postmortem:"]
        lines += [f"  {a['action_id']} {a['owner']} by {a['due']}: {a['gap']} (verified by: {a['verification']})"
                  for a in summary["postmortem_actions"]]
        lines += ["", f"Controls after: {summary['controls_total_after']}; incident {incident.status}; "
                      f"fingerprint {summary['incident_fingerprint']}"]
        return "\n".join(lines)


def postmortem_markdown(incident: Incident, summary: dict[str, Any]) -> str:
    actions = "\n".join(f"| {a['action_id']} | {a['owner']} | {a['due']} | {a['gap']} | {a['verification']} |"
                        for a in summary["postmortem_actions"])
    timeline = "\n".join(f"- {e['at']} {e['actor']}: {e['message']}" for e in incident.events)
    return f"""# Postmortem {incident.id}: {incident.title}

Status: {incident.status}. Classification: {summary['triage']['verdict']} ({summary['triage']['note']}).
Controls after repair: {summary['controls_total_after']}.

## Timeline
{timeline}

## Actions
| id | owner | due | gap it closes | how it is proven done |
|---|---|---|---|---|
{actions}
"""


# ---------------------------------------------------------------------------
# source lateness


class SourceLateDrill(IncidentDrill):
    name = "source-late"
    certify_at = "09:18"  # when the gate runs after the late load

    def play(self) -> dict[str, Any]:
        w = self.world
        w.withhold_manifest(DAY)
        self.certified_history(ALL_DAYS[:-1])
        w.at(at("08:00"))
        blocked = w.execute("scheduled load (manifest absent)", w.tick_schedule())
        w.signal("blocked", f"08:00 schedule: {DAY} BLOCKED_UPSTREAM (manifest absent), nothing published")
        w.at(at("08:10"))
        (incident_id,) = self.detect()
        self.triage(incident_id)
        self.wf.contain(incident_id, ONCALL, partitions=[DAY], hold=False)
        w.signal("contained", f"nothing to withdraw ({DAY} was never certified); consumers keep 2026-09-20")
        self.notify(incident_id, stage="initial",
                    summary=f"Sales for {DAY} are late: the ERP has not delivered the day's batch. Nothing has been "
                            f"published or estimated for {DAY}; certified figures up to 2026-09-20 are unaffected.",
                    repair="waiting for the ERP batch; ERP operations has been paged",
                    next_update="when the ERP batch arrives, or at 09:00 UTC at the latest", restated=False)
        w.at(at("09:05"))
        w.land_manifest(DAY, ready_at=at("09:05"))
        w.signal("manifest_landed", f"{DAY} manifest landed, ready_at 09:05")
        w.at(at("09:06"), phases={RUN_STARTED: at("09:06"), RUN_FINISHED: at("09:14")})
        _, load = w.load_from_sensor("sensor-triggered load", DAY)
        w.at(at(self.certify_at))
        w.certify(load)
        slo = {r.objective: r for r in latest_results(w.platform.ledger, DAY)}
        certified = certified_at(w.platform, DAY)
        missed_by = slo["availability"].missed_by
        w.signal("certified", f"{DAY} certified at {certified}; {slo['availability'].describe()}")
        self.detect()  # the SLO miss joins the same incident
        # the repair of a late source is loading the day once it lands: that run is the incident's repair run
        self.wf.record_repair(incident_id, ONCALL, f"the late ERP batch of {DAY} was loaded as soon as it landed",
                              {"partitions": [DAY]}, run_id=load.run_id)
        w.at(at("09:20"))
        verification = self.wf.verify(incident_id, ONCALL)
        w.signal("verified", f"canonical controls of {DAY}: {verification['per_day'][DAY]['canonical']}")
        self.notify(incident_id, stage="resolved",
                    summary=f"Sales for {DAY} are now available (certified {certified} UTC, {missed_by:g} minutes after "
                            f"the {due_at(DAY):%H:%M} deadline). These are first publications, not corrections.",
                    repair="none needed: the day was loaded as soon as the ERP batch arrived",
                    next_update="no further updates for this incident", restated=False)
        self.wf.resolve(incident_id, ONCALL, f"{DAY} delivered late because the ERP batch was late; data reconciled")
        self.postmortem(incident_id, "team:erp-operations", "2026-10-06",
                        "no readiness metric or escalation when the ERP manifest is late",
                        "a drill with the manifest absent at 08:10 pages ERP operations before 08:15")
        processed = sorted({e.partition for e in load.result.get_asset_materialization_events()})
        incident = self.wf.get(incident_id)
        notices = [e["data"] for e in incident.of_kind("notice")]
        figures = {
            "availability_missed_by": missed_by,
            "certified_at": certified,
            "processed_partitions": processed,
            "signals": [s["kind"] for s in incident.signals],
        }
        acceptance = {
            "incident_opened_from_source_lateness_at_0810": incident.events[0]["at"] == at("08:10")
            and incident.signals[0]["kind"] == "source_late",
            "classified_source_failure": incident.latest("triage")["data"]["verdict"] == "source failure",
            "communicated_as_stale_nothing_fabricated": notices[0]["impact"] == "late"
            and notices[0]["current_state_per_day"][DAY] == "DELAYED" and not blocked.success,
            "certified_0918_availability_missed_by_48": certified == self.certify_at
            and missed_by == minutes_between(due_at(DAY), parse_ts(at(self.certify_at))),
            "only_that_partition_processed": processed == [DAY],
            "controls_total_reconciled": totals_reconcile(w.platform) and verification["passed"],
            "resolved_with_postmortem": incident.status == "resolved" and len(incident.of_kind("postmortem_action")) == 1,
        }
        return self.finish(incident_id, figures, acceptance)


# ---------------------------------------------------------------------------
# schema drift


class SchemaDriftDrill(IncidentDrill):
    name = "schema-drift"

    def play(self) -> dict[str, Any]:
        w = self.world
        w.withhold_manifest(DAY)
        self.certified_history(ALL_DAYS[:-1])
        manifest = drift_rename_field(w.day_dir(DAY), w.withheld / f"{DAY}.json", "line_amount_usd", "gross_line_amount_usd")
        w.signal("erp_change", "the ERP upgrade renamed line_amount_usd to gross_line_amount_usd (manifest still says v1)")
        w.at(at("08:04"))
        w.land_manifest(DAY)
        w.at(at("08:05"), phases={RUN_STARTED: at("08:05"), RUN_FINISHED: at("08:06")})
        _, load = w.load_from_sensor("sensor-triggered load (drifted batch)", DAY)
        published = {s.name: w.platform.warehouse.partition_row_counts(s, [DAY])[DAY] for s in (STG_ORDER_LINES, FACT_SALES)}
        w.signal("gate", f"source_contract_conforms failed; staged rows {published['stg_order_lines']}, "
                         f"fact rows {published['fact_sales']}: the gate published nothing")
        w.at(at("08:07"))
        (incident_id,) = self.detect()
        self.triage(incident_id, origin_field="line_amount_usd")
        self.wf.contain(incident_id, ONCALL, partitions=[DAY])
        w.signal("contained", f"certification of {DAY} held until verification; raw batch {manifest['batch_id']} preserved")
        self.notify(incident_id, stage="initial",
                    summary=f"Sales for {DAY} are unavailable: the ERP changed the layout of its order lines and the "
                            f"contract gate stopped the batch before anything was published.",
                    repair="agreeing a compatible source contract with ERP operations, then replaying the preserved batch",
                    next_update="when the contract decision is made, or at 09:00 UTC", restated=False)
        w.at(at("08:30"))
        approve(w.platform.ledger, manifest["batch_id"], DAY, "v2", "erp-operations", "erp data owner (drill)",
                "gross_line_amount_usd is the renamed line_amount_usd; same meaning", w.clock.now(), incident_id)
        self.wf.note(incident_id, "erp data owner (drill)", "contract v2 approved for the batch: maps gross_line_amount_usd onto line_amount_usd")
        w.signal("contract", f"owner-approved contract v2 for {manifest['batch_id']}: gross_line_amount_usd -> line_amount_usd")
        shutil.rmtree(w.day_dir(DAY))  # replay must come from the preserved raw batch
        w.at(at("08:35"), phases={RUN_STARTED: at("08:35"), RUN_FINISHED: at("08:38")})
        repair = self.wf.repair(incident_id, ONCALL, DAY, DAY, "replay the preserved raw batch under contract v2",
                                include_current=True)
        w.record_run("replay under contract v2 (backfill lane)", repair)
        w.signal("repair", f"replayed {DAY} from the raw store in the {repair.lane} lane; certification still held")
        w.at(at("08:40"))
        verification = self.wf.verify(incident_id, ONCALL)
        w.signal("verified", f"canonical controls of {DAY}: {verification['per_day'][DAY]['canonical']}; re-certified")
        self.detect()
        self.notify(incident_id, stage="resolved",
                    summary=f"Sales for {DAY} are now available and reconciled (certified {certified_at(w.platform, DAY)} UTC). "
                            "No previously published figure changed.",
                    repair="done: the batch was replayed under the approved contract v2",
                    next_update="no further updates for this incident", restated=False)
        self.wf.resolve(incident_id, ONCALL, f"{DAY} replayed under contract v2 and reconciled")
        self.postmortem(incident_id, "team:data-platform", "2026-10-13",
                        "a renamed source field reached the pipeline without a compatibility decision",
                        "a compatibility gate before transform rejects unapproved layouts in CI with the drifted batch")
        incident = self.wf.get(incident_id)
        radius = incident.latest("blast_radius")["data"]
        figures = {
            "published_rows_while_drifted": published,
            "blast_radius_from_field": radius["origin"],
            "blast_radius_assets": [a["asset"] for a in radius["assets"]],
            "contract_applied_on_replay": "v2",
        }
        acceptance = {
            "gate_published_zero_rows": published == {"stg_order_lines": 0, "fact_sales": 0} and not load.success,
            "classified_pipeline_or_schema_bug": incident.latest("triage")["data"]["verdict"] == "pipeline or schema bug",
            "blast_radius_from_the_field": radius["origin"] == "erp_order_lines.line_amount_usd"
            and "mart_finance_daily_sales" in figures["blast_radius_assets"],
            "owner_approved_contract_v2": any(
                a["batch_id"] == manifest["batch_id"] and a["contract_version"] == "v2" and a["owner"] == "erp-operations"
                for a in approvals(w.platform.ledger)),
            "replayed_from_preserved_raw_batch": repair.success,
            "reconciled_and_recertified": verification["passed"]
            and partition_status(w.platform, DAY).state == CERTIFIED,
            "controls_total_reconciled": totals_reconcile(w.platform) and verification["passed"],
            "resolved_with_postmortem": incident.status == "resolved",
        }
        return self.finish(incident_id, figures, acceptance)


# ---------------------------------------------------------------------------
# semantic bug


def dropped_channel_dashboard() -> Dashboard:
    """An executive dashboard whose hand-edited revenue tile leaves out marketplace sales."""
    tiles = tuple(
        Tile(t.key, t.title, "SELECT sales_date, revenue_web_usd + revenue_store_usd AS value FROM mart_executive_revenue",
             t.governed_metric) if t.governed_metric else t
        for t in EXECUTIVE_DASHBOARD.tiles
    )
    return Dashboard(EXECUTIVE_DASHBOARD.asset, EXECUTIVE_DASHBOARD.title, "1.1.0", tiles)


class SemanticBugDrill(IncidentDrill):
    name = "semantic-bug"

    def play(self) -> dict[str, Any]:
        w = self.world
        self.certified_history(ALL_DAYS, when="09:00")
        w.at(at("10:00"))
        deploy(w.platform.ledger, dropped_channel_dashboard(), "bi developer (drill)", "faster revenue tile", w.clock.now())
        w.signal("deploy", "executive dashboard v1.1.0 deployed with a hand-written revenue tile (web + store)")
        shown = sum(tile_values(w.platform, current(w.platform.ledger, EXECUTIVE_DASHBOARD.asset))["gross_revenue_usd"].values())
        governed = sum(governed_values(w.platform).values())
        marketplace = certified_marketplace_revenue(w.platform)
        w.at(at("10:05"))
        self.golden_checks("golden checks after the dashboard deploy")
        pipeline_failures = [r for r in w.platform.ledger.checks.results() if r["blocking"] and not r["passed"]]
        w.signal("golden", f"golden cross-check: dashboard shows {shown} USD, governed metric {governed} USD; "
                           f"pipeline check failures: {len(pipeline_failures)}")
        w.at(at("10:06"))
        (incident_id,) = self.detect()
        self.triage(incident_id, origin_asset=METRIC_GROSS_REVENUE.name)
        containment = self.wf.contain(incident_id, ONCALL, assets=[EXECUTIVE_DASHBOARD.asset], partitions=ALL_DAYS)
        w.signal("contained", f"withdrew {len(containment['withdrawn'])} dashboard certifications; the governed "
                              f"metric and marts reconcile ({format_money(governed)}) and stay certified")
        self.notify(incident_id, stage="initial",
                    summary=f"The Executive revenue dashboard under-reports revenue: it shows {shown:.0f} USD for "
                            f"{ALL_DAYS[0]}..{ALL_DAYS[-1]} where the governed gross revenue is {governed:.0f} USD "
                            "(marketplace sales are missing). Use the Executive revenue mart or the governed metric, "
                            "which are correct and certified.",
                    repair="restoring the dashboard's revenue tile to the governed metric definition",
                    next_update="when the corrected dashboard is verified, or at 11:00 UTC", restated=True)
        w.at(at("10:20"))
        deploy(w.platform.ledger, EXECUTIVE_DASHBOARD, ONCALL, f"{incident_id}: restore the governed definition", w.clock.now())
        # the golden checks re-run on the redeployed dashboard are the repair run (certification stays held)
        recheck = self.golden_checks("golden checks after the governed redeploy")
        self.wf.record_repair(incident_id, ONCALL, "dashboard redeployed: revenue tile compiled from the governed metric",
                              {"dashboard": EXECUTIVE_DASHBOARD.asset, "version": EXECUTIVE_DASHBOARD.version},
                              run_id=recheck)
        w.signal("repair", "executive dashboard v1.0.0 redeployed from the governed metric")
        w.at(at("10:25"))
        verification = self.wf.verify(incident_id, ONCALL)
        corrected = verification["dashboards"]["dashboards"][EXECUTIVE_DASHBOARD.asset]["totals"]["gross_revenue_usd"]
        w.signal("verified", f"dashboard revenue {corrected} = governed {verification['dashboards']['dashboards'][EXECUTIVE_DASHBOARD.asset]['governed_total']}; re-certified")
        self.notify(incident_id, stage="resolved",
                    summary=f"The Executive revenue dashboard is corrected: gross revenue for {ALL_DAYS[0]}..{ALL_DAYS[-1]} "
                            f"is {corrected} USD (it showed {shown:.0f} USD). Please replace figures taken from the dashboard.",
                    repair="done: the tile is compiled from the governed metric and golden-checked",
                    next_update="no further updates for this incident", restated=True,
                    corrected={"gross_revenue_usd": corrected})
        self.wf.resolve(incident_id, ONCALL, f"dashboard restored to the governed metric; {format_money(governed)} re-certified")
        self.postmortem(incident_id, "team:analytics-governance", "2026-10-20",
                        "dashboards could restate a governed metric by hand",
                        "dashboards compile revenue from the governed metric and the golden test runs after every deploy")
        incident = self.wf.get(incident_id)
        states = w.platform.ledger.partitions.states(ALL_DAYS, [EXECUTIVE_DASHBOARD.asset])
        recertified = [d for d in ALL_DAYS if states.served(EXECUTIVE_DASHBOARD.asset, d)]
        figures = {
            "dashboard_shown_usd": f"{shown:.2f}",
            "governed_usd": f"{governed:.2f}",
            "corrected_usd": corrected,
            "pipeline_check_failures": len(pipeline_failures),
            "dashboard_days_recertified": recertified,
        }
        radius = incident.latest("blast_radius")["data"]
        acceptance = {
            "dashboard_665_vs_governed_820": governed == canonical_total(w.platform).revenue_usd
            and marketplace > 0 and shown == governed - marketplace,
            "every_pipeline_check_green": not pipeline_failures,
            "classified_semantic_error": incident.latest("triage")["data"]["verdict"] == "semantic error",
            "blast_radius_metric_marts_dashboards": radius["origin"] == METRIC_GROSS_REVENUE.name
            and set(radius["marts"]) == {"mart_finance_daily_sales", "mart_executive_revenue"}
            and EXECUTIVE_DASHBOARD.asset in radius["dashboards"],
            "affected_certification_withdrawn": len(containment["withdrawn"]) == len(ALL_DAYS),
            "governed_definition_restored_820_recertified": corrected == figures["governed_usd"]
            and recertified == ALL_DAYS,
            "consumers_told_corrected_figure": incident.of_kind("notice")[-1]["data"]["corrected_figures"]
            == {"gross_revenue_usd": figures["governed_usd"]},
            "resolved_with_postmortem": incident.status == "resolved",
        }
        return self.finish(incident_id, figures, acceptance)


# ---------------------------------------------------------------------------
# anomaly hold

OWNER = "erp-operations"  # the source contract's owner: the only one who decides on held figures
OWNER_PERSON = "erp data owner (drill)"
MONEY_FIELDS = ("line_amount_usd", "line_cost_usd")
CENTS = 100
SAMPLE_CONTROLS = ControlTuple(1, 1, 1, 60, 35, 25)  # the bundled sample's 2026-09-21, as the ERP meant it


def send_in_cents(day_dir: Path, manifest_path: Path) -> dict:
    """Multiply every amount of the day's rows by 100; keep the manifest truthful (hash; rows, source_seq unchanged).

    Imitates an ERP export that starts writing cents where the contract says
    dollars: every value stays well typed and in range, only its history
    gives the day away.
    """
    manifest = json.loads(manifest_path.read_text())
    data_path = day_dir / manifest["data_file"]
    rows = [json.loads(line) for line in data_path.read_text().splitlines() if line.strip()]
    for row in rows:
        for name in MONEY_FIELDS:
            row[name] = format(Decimal(row[name]) * CENTS, ".2f")
    data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode()
    data_path.write_bytes(data)
    manifest["data_sha256"] = hashlib.sha256(data).hexdigest()
    manifest_path.write_text(json.dumps(manifest, indent=2))
    return manifest


def resend_sample(day_dir: Path, partition: str, batch_id: str, ready_at: str) -> dict:
    """The ERP re-sends the day's correct rows (the bundled sample's) under a new batch id."""
    original = sample_dir() / "landing" / f"sales_date={partition}"
    manifest = json.loads((original / "_manifest.json").read_text())
    shutil.copyfile(original / manifest["data_file"], day_dir / manifest["data_file"])
    manifest |= {"batch_id": batch_id, "ready_at": ready_at}  # the hash covers the data file only
    (day_dir / "_manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def served_versions(platform: Platform, days: list[str]) -> dict[str, dict[str, Any]]:
    """Per certified product and day, the version and certification consumers are served (None: nothing)."""
    out: dict[str, dict[str, Any]] = {}
    states = platform.ledger.partitions.states(days, CERTIFIED_ASSETS)
    for asset in CERTIFIED_ASSETS:
        served = states.served_map(asset)
        out[asset] = {d: [served[d].version, served[d].certification.id] if d in served else None for d in days}
    return out


def served_rows(platform: Platform, partition: str) -> int:
    """Rows consumers can read for ``partition`` across every certified product."""
    return sum(read_certified(platform, asset, [partition]).num_rows for asset in CERTIFIED_ASSETS)


class AnomalyHoldDrill(IncidentDrill):
    name = "anomaly-hold"
    corrected_batch = "ERP-20260921-02"
    ACCEPTANCE = ("held_not_served", "other_days_unchanged", "incident_opened_with_figures", "classified_source_anomaly",
                  "rejected_batch_retired_and_kept", "corrected_delivery_certified", "controls_total_reconciled",
                  "resolved_with_postmortem")

    def __init__(self, workdir: Path, ephemeral_instance: bool = False, log_level: str | None = "CRITICAL"):
        super().__init__(workdir, ephemeral_instance, log_level)
        self.states: list[list[str]] = []  # [step, state of DAY] as the drill goes

    def day_state(self, step: str) -> str:
        state = partition_status(self.world.platform, DAY).state
        self.states.append([step, state])
        return state

    def stopped(self, why: str, measured: dict[str, bool]) -> dict[str, Any]:
        """Evidence of a drill that cannot go on (the gate did not hold the day): every criterion not measured fails."""
        w = self.world
        summary = {
            "drill": self.name,
            "stopped": why,
            "day_states": self.states,
            "states_after": {d: partition_status(w.platform, d).state for d in ALL_DAYS},
            "acceptance": {name: measured.get(name, False) for name in self.ACCEPTANCE},
            "passed": False,
        }
        artifacts = self.workdir / "artifacts"
        write_json(artifacts / "acceptance_summary.json", summary)
        write_json(artifacts / "evidence" / "runs.json", w.runs)
        write_json(artifacts / "evidence" / "signals.json", [s.to_json() for s in w.signals])
        write_json(artifacts / "evidence" / "ledger.json", w.ledger_excerpt(ALL_DAYS))
        lines = [f"Drill {self.name} stopped: {why}", "", "Timeline:"]
        lines += [f"  {hhmm(s.at)}  {s.kind:<13} {s.message}" for s in w.signals]
        summary["_text"] = "\n".join(lines)
        return summary

    def play(self) -> dict[str, Any]:
        w = self.world
        history = ALL_DAYS[:-1]
        w.withhold_manifest(DAY)
        self.certified_history(history)
        served_before = served_versions(w.platform, history)
        manifest = send_in_cents(w.day_dir(DAY), w.withheld / f"{DAY}.json")
        w.signal("erp_change", f"the ERP export sent {DAY} in cents: every amount x100 (manifest truthful: "
                               f"{manifest['expected_rows']} rows, source_seq {manifest['source_seq_low']}.."
                               f"{manifest['source_seq_high']})")
        w.at(at("08:04"))
        self.day_state("before the delivery")
        w.land_manifest(DAY)
        w.signal("manifest_landed", f"{DAY} manifest landed, batch {manifest['batch_id']}, ready_at 08:04")
        w.at(at("08:05"), phases={RUN_STARTED: at("08:05"), RUN_FINISHED: at("08:06")})
        _, load = w.load_from_sensor("sensor-triggered load (cents batch)", DAY)
        w.at(at("08:06"))
        decisions = w.certify(load)
        held_state = self.day_state("after the gate")
        held_rows = served_rows(w.platform, DAY)
        served_during_hold = served_versions(w.platform, history)
        checks = w.platform.ledger.checks.results(run_id=load.run_id, partition=DAY)
        breaches = next((d.anomaly["breaches"] for d in decisions if d.anomaly), [])
        beyond = (f"{breaches[0]['described']} (+{len(breaches) - 1} more measures)" if breaches
                  else "no measure beyond its history")
        w.signal("gate", f"{sum(r['passed'] for r in checks)} of {len(checks)} checks passed; {DAY} {held_state}: "
                         f"{beyond}; rows served for {DAY}: {held_rows}")
        held_not_served = (load.success and held_state == "ANOMALY_HELD" and held_rows == 0 and bool(decisions)
                           and all(not d.certified and d.reasons and all(r.startswith(ANOMALY_HELD) for r in d.reasons)
                                   for d in decisions))
        w.at(at("08:07"))
        touched = self.detect()
        if held_state != "ANOMALY_HELD" or len(touched) != 1:
            return self.stopped(f"the gate left {DAY} {held_state} and detection opened {len(touched)} incident(s)",
                                {"held_not_served": held_not_served,
                                 "other_days_unchanged": served_before == served_during_hold})
        (incident_id,) = touched
        # Triage weighs source evidence, the anomaly hold included, only from the schedule + grace (08:10) on.
        w.at(at("08:10"))
        self.triage(incident_id)
        containment = self.wf.contain(incident_id, ONCALL, partitions=[DAY])
        self.day_state("after containment")
        served_contained = served_versions(w.platform, history)
        w.signal("contained", f"withdrew {len(containment['withdrawn'])} certifications ({DAY} was never certified); "
                              f"certification of {DAY} held; consumers keep {history[0]}..{history[-1]}")
        signal = next(s for s in self.wf.get(incident_id).signals if s["kind"] == "anomaly_held")
        figures_words = signal["consumer_figures"]
        self.notify(incident_id, stage="initial",
                    summary=f"Sales for {DAY} are held back: the ERP's delivery shows {figures_words['observed']} "
                            f"where {figures_words['usual']} is usual, and waits for its data owner. Nothing has been "
                            f"published for {DAY}; certified figures up to {history[-1]} are unaffected.",
                    repair="ERP operations confirms or rejects the held figures; a rejected day waits for a "
                           "corrected delivery",
                    next_update="when the data owner decides, or at 09:00 UTC", restated=False)
        w.at(at("08:20"))
        retired = reject_anomaly(w.platform, DAY, OWNER, OWNER_PERSON, "sent in cents: every amount x100",
                                 w.clock.now(), incident_id)
        report_day_states(w.instance, w.platform, [DAY])
        self.wf.note(incident_id, OWNER_PERSON, f"held figures of {DAY} rejected (sent in cents); batches retired: "
                                                f"{', '.join(retired)}")
        rejected_state = self.day_state("after the owner's rejection")
        in_raw_store = [b.batch_id for b in w.platform.raw_store.batches(DAY)]
        w.signal("owner", f"{OWNER} rejected the held figures: retired {', '.join(retired)} (bytes kept in the raw "
                          f"store); {DAY} is {rejected_state} until a corrected delivery loads")
        w.at(at("08:45"))
        corrected = resend_sample(w.day_dir(DAY), DAY, self.corrected_batch, at("08:45"))
        w.signal("erp_resend", f"the ERP re-sent {DAY} in dollars as {corrected['batch_id']}, ready_at 08:45")
        w.at(at("08:46"), phases={RUN_STARTED: at("08:46"), RUN_FINISHED: at("08:48")})
        repair = self.wf.repair(incident_id, ONCALL, DAY, DAY, f"load the corrected delivery {corrected['batch_id']}",
                                include_current=True)
        w.record_run("corrected delivery (backfill lane)", repair)
        self.day_state("after the repair run")
        w.signal("repair", f"loaded {corrected['batch_id']} for {DAY} in the {repair.lane} lane; certification "
                           "still held")
        w.at(at("08:50"))
        verification = self.wf.verify(incident_id, ONCALL)
        final_state = self.day_state("after verification")
        w.signal("verified", f"canonical controls of {DAY}: {verification['per_day'][DAY]['canonical']}; "
                             f"{DAY} {final_state}")
        self.detect()  # the availability miss of the held day joins the same incident
        self.notify(incident_id, stage="resolved",
                    summary=f"Sales for {DAY} are now available (certified {certified_at(w.platform, DAY)} UTC) from "
                            "the ERP's corrected delivery. The wrong figures were never published.",
                    repair=f"done: the data owner rejected the delivery sent in cents and the corrected batch "
                           f"{corrected['batch_id']} was loaded and reconciled",
                    next_update="no further updates for this incident", restated=False)
        self.wf.resolve(incident_id, ONCALL, f"{DAY} held as an anomaly (sent in cents), rejected by {OWNER}, "
                                             "corrected delivery certified")
        self.postmortem(incident_id, "team:erp-operations", "2026-10-06",
                        "the ERP export changed its money unit without any field of the delivery saying so",
                        "the ERP export's release checklist compares a test day's totals with production "
                        "before a release")
        incident = self.wf.get(incident_id)
        status = partition_status(w.platform, DAY)
        served = w.platform.ledger.partitions.states([DAY]).served(MART_FINANCE_DAILY_SALES.name, DAY)
        triage = incident.latest("triage")["data"]
        raw_kept = {b.batch_id: b.manifest.get("data_sha256") for b in w.platform.raw_store.batches(DAY)}
        figures = {
            "anomaly_signal": {k: signal[k] for k in ("observed", "expected", "summary", "consumer_figures")},
            "day_states": self.states,
            "gate_reasons": sorted({r for d in decisions for r in d.reasons}),
            "rejected_batches": retired,
            "raw_store_batches": sorted(raw_kept),
            "corrected_batch": corrected["batch_id"],
            "certified_controls": served.certification.controls.to_json() if served else None,
            "signals": [s["kind"] for s in incident.signals],
        }
        acceptance = {
            "held_not_served": held_not_served,
            "other_days_unchanged": served_before == served_during_hold == served_contained
            == served_versions(w.platform, history) and not containment["withdrawn"]
            and all(v is not None for by_day in served_before.values() for v in by_day.values()),
            "incident_opened_with_figures": incident.signals[0]["kind"] == "anomaly_held"
            and signal["observed"].get("revenue_usd") == format(SAMPLE_CONTROLS.revenue_usd * CENTS, ".2f")
            and "median" in signal["expected"].get("revenue_usd", ""),
            "classified_source_anomaly": triage["verdict"] == "source failure"
            and any("source anomaly" in e for e in triage["evidence"]["source failure"]),
            "rejected_batch_retired_and_kept": retired == [manifest["batch_id"]] and rejected_state == "DELAYED"
            and manifest["batch_id"] in retired_batches(w.platform.ledger, DAY)
            and manifest["batch_id"] in in_raw_store and raw_kept.get(manifest["batch_id"]) == manifest["data_sha256"],
            "corrected_delivery_certified": status.state == CERTIFIED and status.certified_version == 1
            and served is not None and served.certification.controls == SAMPLE_CONTROLS,
            "controls_total_reconciled": totals_reconcile(w.platform) and verification["passed"],
            "resolved_with_postmortem": incident.status == "resolved" and len(incident.of_kind("postmortem_action")) == 1,
        }
        return self.finish(incident_id, figures, acceptance)


DRILLS: dict[str, Callable[..., IncidentDrill]] = {
    "source-late": SourceLateDrill,
    "schema-drift": SchemaDriftDrill,
    "semantic-bug": SemanticBugDrill,
    "anomaly-hold": AnomalyHoldDrill,
}


def run_incident_drill(name: str, workdir: Path, ephemeral_instance: bool = False,
                       log_level: str | None = "CRITICAL") -> dict[str, Any]:
    return DRILLS[name](workdir, ephemeral_instance, log_level).play()
