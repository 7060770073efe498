"""The incident workflow: contain, identify, notify, repair, verify, resolve, postmortem.

Every step reads evidence from the ledger and the live asset graph and
appends what it did to the incident, with the actor and the logical time.
The order is enforced where it protects consumers: certification of the
affected scope stays held from containment until verification has proven
that a repair run succeeded with every blocking check passing and that every
layer reconciles with the controls recomputed from the immutable raw evidence
(``VERIFY_CONDITIONS``); an incident cannot be resolved before that.

Containment freezes the suspect version, not the last known good one: a
served certification is withdrawn only when it may itself be wrong, never
when every piece of evidence of its day is about newer data that was never
certified (a held re-send, a failed or refused load).

Every free text an operator gives (notes, reasons, summaries, postmortem gaps,
verifications and evidence) passes the PII redactor before it is stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Callable

import dagster as dg

from ....defs.checks.certification_checks import report_day_states
from ....domain.check_names import GOLDEN_MATCHES_GOVERNED_METRIC
from ....domain.controls import ControlTuple
from ....errors import UsageError
from ....product.canonical_controls import verify_partitions
from ....product.certified_branch import converge
from ....product.dashboards import DEFAULT_DASHBOARDS, current, governed_values, tile_values
from ....product.pii import redact_for
from ....product.anomaly import ANOMALY_HELD, anomaly_reasons
from ....product.restatements import held_reason
from ....product.run_certification import certify_and_deliver
from ....product.serving import partition_status
from ....store.ledger.partition_states import (
    BLOCKED_UPSTREAM,
    BUILT,
    CERTIFICATION_REFUSED,
    CERTIFIED,
    WITHDRAWN,
)
from ....store.platform import Platform
from ....store.tables import CERTIFIED_ASSETS, DAILY_CHAIN, METRIC_GROSS_REVENUE, RAW_ORDER_LINES
from ....product.access.access_log import log_decision
from ....product.access.policy import WITHDRAW_CERTIFICATION, AccessDenied, principal_for, require
from ...runs.backfills import BackfillRequest, run_backfill
from ...runs.chains import run_golden_checks
from . import blast_radius as radius
from ....store.ledger.incidents import (
    CONTAINED,
    IDENTIFIED,
    REPAIRING,
    RESOLVED,
    VERIFYING,
    Incident,
    IncidentError,
    IncidentStore,
)
from .notices import build_notice, to_markdown
from .triage import SEMANTIC, classify, served_version_findings

NOTICE_STAGES = ("initial", "update", "resolved")
CONSUMER_REPORT = "consumer_report"


@dataclass
class IncidentWorkflow:
    platform: Platform
    defs: dg.Definitions
    instance: dg.DagsterInstance | None = None
    log_level: str | None = None

    @property
    def store(self) -> IncidentStore:
        return IncidentStore(self.platform.ledger)

    def _now(self):
        return self.platform.clock.now()

    def get(self, incident_id: str) -> Incident:
        return self.store.get(incident_id)

    def _clean(self, text: str) -> str:
        """``text`` with every customer name and email redacted: applied to each free text before it is stored."""
        return redact_for(self.platform)(text)

    # -- notes ------------------------------------------------------------
    def note(self, incident_id: str, actor: str, text: str) -> None:
        if not (text or "").strip():
            raise UsageError("a note needs its text (--text)")
        self.get(incident_id)
        self.store.append(incident_id, self._now(), actor, "note", self._clean(text))

    # -- identify: triage, blast radius, last known good -------------------
    def identify(self, incident_id: str, actor: str, origin_asset: str | None = None,
                 origin_field: str | None = None) -> dict[str, Any]:
        incident = self.get(incident_id)
        triage = classify(self.platform, incident)
        try:  # before anything is recorded: an unknown origin is a wrong argument
            if origin_field:
                br = radius.from_field(self.defs, origin_field, incident.partitions)
            else:
                br = radius.from_asset(self.defs, origin_asset or _default_origin(incident, triage["verdict"]),
                                       incident.partitions)
        except IncidentError as exc:
            if origin_field or origin_asset:
                raise UsageError(str(exc)) from None
            raise
        self.store.append(incident_id, self._now(), actor, "triage",
                          f"triage: {triage['verdict']} ({triage['note']})", data=triage)
        self.store.append(incident_id, self._now(), actor, "blast_radius",
                          f"blast radius from {br.origin}: {len(br.affected)} assets, owners {', '.join(br.owners)}",
                          data=br.to_json())
        self.store.append(incident_id, self._now(), actor, "last_known_good", "last known good state recorded",
                          data=_last_known_good(self.platform, incident.partitions))
        self.store.advance(self.get(incident_id), IDENTIFIED, self._now(), actor, f"identified: {triage['verdict']}")
        return {"triage": triage, "blast_radius": br}

    # -- contain -------------------------------------------------------------
    def contain(self, incident_id: str, actor: str, assets: list[str] | None = None,
                partitions: list[str] | None = None, withdraw: bool = True, hold: bool = True,
                withdraw_served: bool = False) -> dict[str, Any]:
        """Freeze the suspect version: withdraw served certifications in doubt, hold certification, keep the evidence.

        A served certification is withdrawn when it may itself be wrong. It
        stays served, as the last known good version, when every signal of its
        day is about newer data that was never certified (``_keeps_serving``):
        a re-send held by the restatement guard, a load that failed or was
        refused. The hold then stops only that new data from being certified;
        ``withdraw_served`` withdraws it all the same (the operator doubts it
        on evidence the incident does not hold). A late source has nothing wrong to withdraw and no reason to hold
        correct data back: ``hold=False`` records containment without a hold.
        """
        incident = self.get(incident_id)
        self._authorise(actor, WITHDRAW_CERTIFICATION, f"contain {incident_id}")
        partitions = sorted(partitions or incident.partitions)
        if not partitions:
            raise IncidentError("containment needs the affected days (--from/--to)")
        assets = assets or list(CERTIFIED_ASSETS)
        now = self._now()
        ledger = self.platform.ledger
        keeps = {p: None if withdraw_served else _keeps_serving(self.platform, incident, p) for p in partitions}
        withdrawn, kept = [], []
        # One read before any withdrawal: withdrawing one asset's day changes no other asset's served version.
        states = ledger.partitions.states(partitions, assets)
        for asset in assets:
            served = states.served_map(asset)
            for p in partitions:
                if p not in served:
                    continue
                cert = served[p].certification
                entry = {"asset": asset, "partition": p, "version": served[p].version,
                         "fingerprint": cert.fingerprint}
                if withdraw and keeps[p] is None:
                    ledger.partitions.append(asset, p, WITHDRAWN, now, actor=actor, reason=f"contained by {incident_id}",
                                             detail={"certification_ids": [cert.id], "incident_id": incident_id})
                    withdrawn.append(entry)
                else:
                    kept.append({**entry, "because": keeps[p] or "containment without withdrawal (--no-withdraw)"})
        hold_id = (ledger.holds.hold(assets, partitions[0], partitions[-1], actor, f"incident {incident_id} under way",
                               now, incident_id=incident_id) if hold else None)
        evidence = {
            "raw_batches": [{"batch_id": b["batch_id"], "partition": b["partition"], "data_sha256": b["data_sha256"]}
                            for p in partitions for b in ledger.batches.list(p)],
            "preserved": "raw store batches are write-once; withdrawn versions stay readable by snapshot (time travel)",
        }
        data = {"assets": assets, "partitions": partitions, "withdrawn": withdrawn, "kept": kept, "hold_id": hold_id,
                "evidence": evidence}
        self.store.append(incident_id, now, actor, "scope", "scope set", data={"assets": assets, "partitions": partitions})
        held = (f"certification held for {', '.join(assets)} {partitions[0]}..{partitions[-1]}" if hold
                else "certification not held (nothing wrong was published)")
        keeping = "".join(f"; {line}" for line in kept_versions(kept))
        self.store.append(incident_id, now, actor, "containment",
                          f"contained: {len(withdrawn)} certifications withdrawn{keeping}; {held}", data=data)
        self.store.advance(self.get(incident_id), CONTAINED, now, actor, "contained")
        if withdrawn:
            converge(self.platform)  # outside engines stop reading the withdrawn version now, not at the next tick
        if self.instance is not None:
            report_day_states(self.instance, self.platform, partitions)
        return data

    def _authorise(self, actor: str, permission: str, action: str) -> None:
        try:
            principal = require(actor, permission)
        except AccessDenied as exc:
            try:
                log_decision(self.platform, principal_for(actor), action, "deny", str(exc))
            except AccessDenied:
                pass  # not a principal at all: nothing to attribute the attempt to
            raise
        log_decision(self.platform, principal, action, "allow", permission)

    # -- communicate ---------------------------------------------------------
    def notify(self, incident_id: str, actor: str, *, stage: str, summary: str, repair: str, next_update: str,
               restated: bool, corrected: dict | None = None, out_dir: Path | None = None) -> dict[str, Any]:
        if stage not in NOTICE_STAGES:
            raise UsageError(f"a notice's stage is one of {', '.join(NOTICE_STAGES)}, not {stage!r}")
        if not (summary or "").strip():
            raise UsageError("a notice needs its summary (--summary)")
        incident = self.get(incident_id)
        notice = build_notice(self.platform, incident, stage=stage, summary=summary, repair=repair,
                              next_update=next_update, restated=restated, corrected=corrected)
        markdown = to_markdown(notice)
        self.store.append(incident_id, self._now(), actor, "notice", f"consumer notice ({stage}) issued",
                          data={**notice, "markdown": markdown})
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            stem = f"{incident_id}-{len(incident.of_kind('notice')) + 1:02d}-{stage}"
            (out_dir / f"{stem}.json").write_text(json.dumps(notice, indent=2, sort_keys=True, default=str) + "\n")
            (out_dir / f"{stem}.md").write_text(markdown)
        return notice

    # -- repair ----------------------------------------------------------------
    def repair(self, incident_id: str, actor: str, start: str, end: str, reason: str, start_at: str | None = None,
               include_current: bool = False):
        """Rebuild the scope from raw (or from ``start_at`` down) in the backfill lane; certification stays held.

        An invalid request (no or a bad range, no reason) is refused before
        anything is recorded. The repair records which certifications were
        refused for a reason other than this incident's hold (``refused_beyond_hold``).
        """
        if self.instance is None:
            raise IncidentError("repair needs a Dagster instance")
        if not start:
            raise UsageError("a repair needs its days (--from, and --to for more than one)")
        request = BackfillRequest(start=start, end=end or start, operator=actor, reason=self._clean(reason or ""),
                                  incident_id=incident_id, start_at=start_at, include_current=include_current)
        problems = request.validate(self.platform)
        if problems:
            raise UsageError("repair refused: " + "; ".join(problems))
        self.store.advance(self.get(incident_id), REPAIRING, self._now(), actor, f"repairing {start}..{request.end}")
        outcome = run_backfill(self.defs, self.instance, self.platform, request, log_level=self.log_level)
        refused = [d for d in outcome.decisions if not d.certified]
        self.store.append(
            incident_id, self._now(), actor, "repair",
            f"repair run {outcome.run_id} in the {outcome.lane} lane "
            f"{'succeeded' if outcome.success else 'failed'}; certification held until verification",
            data={"request_id": outcome.request_id, "run_id": outcome.run_id, "lane": outcome.lane,
                  "partitions": outcome.partitions, "start_at": start_at, "success": outcome.success,
                  "failures": outcome.failures, "held_certifications": len(refused),
                  "refused_beyond_hold": refused_beyond_hold(outcome.decisions, incident_id)},
        )
        return outcome

    def record_repair(self, incident_id: str, actor: str, description: str, data: dict[str, Any],
                      run_id: str | None = None) -> None:
        """A repair that is not a rebuild by ``repair`` (e.g. redeploying a dashboard, a late batch loaded on arrival).

        When a run carried the repair out (the load the manifest sensor started
        once the late batch landed, the golden check run after a dashboard was
        redeployed), pass its ``run_id``: its outcome is read from the Dagster
        instance, never taken from the caller, and verification holds it to
        the same rules as a rebuild. Without a run, the repair is recorded but
        verification still waits for a successful repair run.
        """
        incident = self.get(incident_id)
        description = self._clean(description)
        if run_id is not None:
            data = {**data, **self._run_outcome(run_id)}
            description += f" (run {run_id} {'succeeded' if data['success'] else 'failed'})"
        self.store.advance(incident, REPAIRING, self._now(), actor, "repairing")
        self.store.append(incident_id, self._now(), actor, "repair", description, data=data)

    def _run_outcome(self, run_id: str) -> dict[str, Any]:
        if self.instance is None:
            raise IncidentError("recording a repair run needs the Dagster instance it ran on")
        run = self.instance.get_run_by_id(run_id)
        if run is None:
            raise IncidentError(f"run {run_id} is not known to the Dagster instance")
        days = sorted({r["partition"] for r in self.platform.ledger.checks.results(run_id=run_id)})
        return {"run_id": run_id, "success": run.status == dg.DagsterRunStatus.SUCCESS, "partitions": days,
                "job": run.job_name}

    # -- verify ----------------------------------------------------------------
    def verify(self, incident_id: str, actor: str) -> dict[str, Any]:
        """Release the hold and re-certify the scope only if every verification condition holds.

        The conditions are ``VERIFY_CONDITIONS``: a successful repair run is
        recorded on the incident; every blocking check (and dashboard golden
        check) of the repair run that checked each day passed; every layer's
        controls equal the controls recomputed from raw, and all-zero controls
        pass only for a day whose manifest said 0 rows; dashboards touched by
        the incident show the governed metric. Otherwise the verification is
        recorded as FAILED with the list of what is missing, and the hold stays.
        """
        incident = self.get(incident_id)
        partitions = incident.partitions
        report = verify_partitions(self.platform, partitions)
        golden = _golden_report(self.platform, incident)
        evidence = VerifyEvidence(self.platform, self.instance, incident, report, golden)
        missing = [item for condition in VERIFY_CONDITIONS for item in condition(evidence)]
        passed = not missing
        repair_runs = _repair_runs(incident)
        data = {**report, "dashboards": golden, "passed": passed, "missing": missing,
                "repair_run": repair_runs[-1]["run_id"] if repair_runs else None}
        if passed:
            for hold in self.platform.ledger.holds.active():
                if hold["incident_id"] == incident_id:
                    self.platform.ledger.holds.release(hold["id"], actor, f"{incident_id} verified", self._now())
            builds = _uncertified_builds(self.platform, partitions)
            decisions = certify_and_deliver(self.platform, builds, True, f"{actor} (verification)")
            if self.instance is not None:
                report_day_states(self.instance, self.platform, partitions)
            if golden and self.instance is not None:
                decisions += self._recheck_dashboards(actor)
            data["recertified"] = sorted({(d.asset, d.partition) for d in decisions if d.certified})
            data["still_refused"] = [d.to_json() for d in decisions if not d.certified]
        outcome = (f"passed: canonical controls {report['canonical_total']}" if passed
                   else f"FAILED, certification stays held: {'; '.join(missing)}")
        self.store.append(incident_id, self._now(), actor, "verification", f"verification {outcome}", data=data)
        self.store.advance(self.get(incident_id), VERIFYING, self._now(), actor, "verifying")
        return data

    def _recheck_dashboards(self, actor: str):
        """Run the dashboards' golden checks for real and certify the days that pass."""
        _, decisions = run_golden_checks(self.defs, self.instance, self.platform, f"{actor} (verification)",
                                         self.log_level)
        return decisions

    # -- resolve -----------------------------------------------------------------
    def resolve(self, incident_id: str, actor: str, summary: str) -> None:
        incident = self.get(incident_id)
        verification = incident.latest("verification")
        problems = []
        if verification is None or not verification["data"]["passed"]:
            problems.append("verification has not passed (run `atlasmart incident verify`)")
        else:
            # the world may have moved since verification: re-check now
            if not verify_partitions(self.platform, incident.partitions)["reconciled"]:
                problems.append("canonical controls no longer reconcile")
        for p in incident.partitions:
            state = partition_status(self.platform, p).state
            if state != CERTIFIED:
                problems.append(f"{p} is {state}, not CERTIFIED")
        if any(h["incident_id"] == incident_id for h in self.platform.ledger.holds.active()):
            problems.append("certification is still held for this incident")
        if problems:
            raise IncidentError(f"{incident_id} cannot be resolved: " + "; ".join(problems))
        self.store.append(incident_id, self._now(), actor, "resolution", self._clean(summary), status=RESOLVED)

    # -- postmortem -------------------------------------------------------------
    def add_action(self, incident_id: str, actor: str, owner: str, due: str, gap: str, verification: str) -> str:
        incident = self.get(incident_id)
        opened = date.fromisoformat(incident.opened_at[:10])
        problems = []
        if not (owner or "").strip():
            problems.append("an owner")
        try:
            if date.fromisoformat(due or "") < opened:
                problems.append(f"a due date on or after the day the incident opened ({opened.isoformat()}), "
                                f"not {due}")
        except ValueError:
            problems.append("a due date (YYYY-MM-DD)")
        if not (gap or "").strip():
            problems.append("the detected gap it closes")
        if not (verification or "").strip():
            problems.append("how completion will be verified")
        if problems:
            raise IncidentError("postmortem action rejected: it needs " + ", ".join(problems))
        gap, verification = self._clean(gap), self._clean(verification)
        action_id = self.platform.ledger.allocate_id("PM")
        self.store.append(incident_id, self._now(), actor, "postmortem_action", f"action {action_id} for {owner}: {gap}",
                          data={"action_id": action_id, "owner": owner, "due": due, "gap": gap,
                                "verification": verification})
        return action_id

    def complete_action(self, incident_id: str, action_id: str, actor: str, evidence: str) -> None:
        incident = self.get(incident_id)
        if not any(e["data"].get("action_id") == action_id for e in incident.of_kind("postmortem_action")):
            raise IncidentError(f"{incident_id} has no postmortem action {action_id}")
        if not (evidence or "").strip():
            raise IncidentError(f"completing {action_id} needs the evidence that proves it done")
        evidence = self._clean(evidence)
        self.store.append(incident_id, self._now(), actor, "action_done", f"action {action_id} done: {evidence}",
                          data={"action_id": action_id, "evidence": evidence})


def _keeps_serving(platform: Platform, incident: Incident, day: str) -> str | None:
    """Why containment keeps serving ``day``'s certified version, or None when that version is itself in doubt.

    The served version is the last known good one when every data signal of
    the incident for the day names a run that built (or tried to build) newer
    data of the day and that nothing of the run was ever certified: the
    suspect is that run's data, held, refused or failed, not what consumers
    read. A data signal without a run, a run that built nothing of the day
    (checks run over the stored tables) or a run some certification came from
    leaves the served version in doubt, and it is withdrawn.

    A consumer report is a signal about what consumers see, not data evidence.
    Alone, it is the only word on the day and the served version is in doubt.
    Beside data evidence that explains it, it puts the served version in doubt
    only when it disputes the served figures and triage finds them wrong
    (``served_version_findings``): it is never a reason to withdraw by being there.
    """
    signals = [s for s in incident.signals if s.get("partition") == day]
    reports = [s for s in signals if s["kind"] == CONSUMER_REPORT]
    data = [s for s in signals if s["kind"] != CONSUMER_REPORT]
    if not data:
        return None
    events = platform.ledger.partitions.states([day]).events()
    certified_runs = {e.run_id for e in events if e.state == CERTIFIED}
    candidate_runs = {e.run_id for e in events
                      if e.asset in DAILY_CHAIN and e.state in (BUILT, CERTIFICATION_REFUSED, BLOCKED_UPSTREAM)}
    candidate_runs |= {p["run_id"] for p in platform.ledger.runs.phases(partition=day)}
    runs = {s.get("run_id") for s in data}
    if None in runs or runs - candidate_runs or runs & certified_runs:
        return None
    suspects = sorted({_SUSPECT_WORDS.get(s["kind"], "newer data") for s in data})
    because = f"the suspect {' and '.join(suspects)} was never certified"
    disputing = [r for r in reports if _disputes_served(r)]
    if disputing:
        wrong = served_version_findings(platform, day)["wrong"]
        if wrong:
            return None
        because += ("; the consumer report disputes figures triage finds as certified"
                    if len(disputing) == 1 else "; the consumer reports dispute figures triage finds as certified")
    elif reports:
        because += "; the consumer report names no served figure"
    return because


def _disputes_served(report: dict[str, Any]) -> bool:
    """A report about what consumers read of its day: the whole day, a certified product or a dashboard."""
    asset = report.get("asset")
    return asset is None or asset in CERTIFIED_ASSETS or asset in DEFAULT_DASHBOARDS


# What a signal says the never-certified suspect data is (contain's "kept" lines).
_SUSPECT_WORDS = {
    "restatement_held": "re-send held for its owner",
    "anomaly_held": "delivery held for its owner",
    "check_failed": "build that failed its checks",
    "run_failed": "failed load",
    "source_late": "late delivery",
    "slo_missed": "late load",
}


def refused_beyond_hold(decisions, incident_id: str) -> list[dict[str, Any]]:
    """The certifications a repair run's gate refused for a reason other than the incident's own hold, with those reasons."""
    own_hold = f"certification held by {incident_id}:"
    out = []
    for d in decisions:
        reasons = [r for r in d.reasons if not r.startswith(own_hold)]
        if not d.certified and reasons:
            out.append({"asset": d.asset, "partition": d.partition, "reasons": reasons})
    return out


def kept_versions(kept: list[dict[str, Any]]) -> list[str]:
    """One line per day whose certified version containment kept serving: which version consumers keep, and why."""
    by_day: dict[str, list[dict[str, Any]]] = {}
    for entry in kept:
        by_day.setdefault(entry["partition"], []).append(entry)
    lines = []
    for day, entries in sorted(by_day.items()):
        versions = sorted({e["version"] for e in entries})
        lines.append(f"consumers keep certified version {'/'.join(map(str, versions))} of {day} "
                     f"({entries[0]['because']})")
    return lines


def _default_origin(incident: Incident, verdict: str) -> str:
    if verdict == SEMANTIC:
        return METRIC_GROSS_REVENUE.name
    failed_checks = [s for s in incident.signals if s["kind"] == "check_failed"]
    if failed_checks:
        return failed_checks[0]["asset"]
    return "raw_order_lines"


def _last_known_good(platform: Platform, partitions: list[str]) -> dict[str, Any]:
    out = {}
    states = platform.ledger.partitions.states(assets=CERTIFIED_ASSETS)  # every day: the latest certified one
    for asset in CERTIFIED_ASSETS:
        served = states.served_map(asset)
        out[asset] = {
            "in_scope": {p: {"version": served[p].version, "fingerprint": served[p].certification.fingerprint,
                             "controls": served[p].certification.controls.to_json()
                             if served[p].certification.controls else None}
                         for p in partitions if p in served},
            "latest_certified_day": max(served) if served else None,
        }
    return out


def _uncertified_builds(platform: Platform, partitions: list[str]):
    """The newest build of each certified asset and day in scope that is not the one being served."""
    builds = []
    states = platform.ledger.partitions.states(partitions, CERTIFIED_ASSETS)
    for asset in CERTIFIED_ASSETS:
        for p in partitions:
            day = states.get(asset, p)
            if not day.builds:
                continue
            newest = day.builds[-1]
            serving = day.served
            if serving is None or serving.certification.detail.get("built_event_id") != newest.id:
                builds.append(newest)
    return builds


def _golden_report(platform: Platform, incident: Incident) -> dict[str, Any]:
    """For incidents touching dashboards: do their governed tiles equal the governed metric now?"""
    dashboards = [s.get("asset") for s in incident.signals if s.get("asset") in DEFAULT_DASHBOARDS]
    if not dashboards:
        return {}
    governed = governed_values(platform)
    report, passed = {}, True
    for asset in sorted(set(dashboards)):
        dashboard = current(platform.ledger, asset)
        values = tile_values(platform, dashboard)
        claimed = [t.key for t in dashboard.governed_tiles]
        totals = {k: format(sum(values[k].values()), "f") for k in claimed}
        ok = all(values[k] == governed for k in claimed)
        passed &= ok
        report[asset] = {"version": dashboard.version, "totals": totals,
                         "governed_total": format(sum(governed.values()), "f"), "matches": ok}
    return {"passed": passed, "dashboards": report}


# -- verification conditions ---------------------------------------------------


@dataclass(frozen=True)
class VerifyEvidence:
    """What the verification conditions judge: the incident, controls recomputed from raw, the dashboards."""

    platform: Platform
    instance: dg.DagsterInstance | None
    incident: Incident
    controls: dict[str, Any]  # verify_partitions(...) of the incident's days
    golden: dict[str, Any]  # _golden_report(...), {} when no dashboard is involved


def _repair_runs(incident: Incident) -> list[dict[str, Any]]:
    """Repairs carried out by a run, oldest first."""
    return [e["data"] for e in incident.of_kind("repair") if e["data"].get("run_id")]


def _succeeded(evidence: VerifyEvidence, repair: dict[str, Any]) -> bool:
    """The repair's run succeeded: as recorded, and as the Dagster instance says when it still knows the run."""
    if not repair.get("success"):
        return False
    run = evidence.instance.get_run_by_id(repair["run_id"]) if evidence.instance is not None else None
    return run is None or run.status == dg.DagsterRunStatus.SUCCESS


def repair_run_succeeded(evidence: VerifyEvidence) -> list[str]:
    """A repair run is recorded on the incident, and the latest one succeeded."""
    runs = _repair_runs(evidence.incident)
    if not runs:
        return ["no repair run is recorded on the incident (`atlasmart incident repair`)"]
    latest = runs[-1]
    if not _succeeded(evidence, latest):
        failures = "; ".join(latest.get("failures") or []) or "the run did not succeed"
        return [f"the latest repair run {latest['run_id']} failed: {failures}"]
    return []


def repair_checks_passed(evidence: VerifyEvidence) -> list[str]:
    """Each day was checked by a repair run, that run succeeded, and its blocking (and golden) checks of the day passed."""
    missing = []
    runs = _repair_runs(evidence.incident)
    checks = evidence.platform.ledger.checks
    for day in evidence.incident.partitions:
        found = None
        for repair in reversed(runs):
            results = [r for r in checks.results(run_id=repair["run_id"], partition=day)
                       if r["blocking"] or r["check_name"] == GOLDEN_MATCHES_GOVERNED_METRIC]
            if results:
                found = repair, results
                break
        if found is None:
            missing.append(f"{day}: no repair run ran the blocking checks of this day")
            continue
        repair, results = found
        failed = sorted({f"{r['asset']}:{r['check_name']}" for r in results if not r["passed"]})
        if failed:
            missing.append(f"{day}: checks failed in repair run {repair['run_id']}: {', '.join(failed)}")
        elif not _succeeded(evidence, repair):
            missing.append(f"{day}: repair run {repair['run_id']} checked this day but did not succeed")
    return missing


def controls_match_raw(evidence: VerifyEvidence) -> list[str]:
    """Every layer equals the controls recomputed from raw; all-zero controls only for a day the manifest said was empty."""
    missing = []
    ledger = evidence.platform.ledger
    empty = str(ControlTuple())
    raw_rows = evidence.platform.warehouse.partition_row_counts(RAW_ORDER_LINES, evidence.incident.partitions)
    for day, result in evidence.controls["per_day"].items():
        if result["mismatches"]:
            missing.append(f"{day}: {', '.join(result['mismatches'])} differ from the controls recomputed from raw "
                           f"{result['canonical']}")
        manifest_rows = sum(b["expected_rows"] for b in ledger.batches.list(day))
        if result["canonical"] == empty and manifest_rows > 0:
            missing.append(f"{day}: controls are all zero, but the manifest says {manifest_rows} rows and raw holds "
                           f"{raw_rows.get(day, 0)}: no row was accepted as a paid line (zeros pass only for a day "
                           "whose manifest says 0 rows)")
    return missing


def dashboards_match_governed(evidence: VerifyEvidence) -> list[str]:
    """Every dashboard touched by the incident shows the governed metric in every tile that presents it."""
    if not evidence.golden or evidence.golden.get("passed", True):
        return []
    return [f"{name}: tiles show {report['totals']} but the governed metric is {report['governed_total']}"
            for name, report in evidence.golden["dashboards"].items() if not report["matches"]]


def owner_decided_held_restatements(evidence: VerifyEvidence) -> list[str]:
    """A day whose re-send the restatement guard holds needs its owner's decision (approve, or retire the batch)."""
    missing = []
    for day in evidence.incident.partitions:
        held = held_reason(evidence.platform, day)
        if held:
            missing.append(f"{day}: {held}; the data owner must approve the figures (atlasmart restatement approve) "
                           "or reject them (atlasmart batch retire, then repair)")
    return missing


def owner_decided_anomaly_holds(evidence: VerifyEvidence) -> list[str]:
    """A day the anomaly guard holds needs its owner's decision before anything can be verified as right."""
    held = anomaly_reasons(evidence.platform, evidence.incident.partitions)
    return [f"{day}: {reason}; the data owner must approve the figures (atlasmart anomaly approve) or reject them "
            "(atlasmart anomaly reject, then load a corrected delivery)"
            for day, reason in sorted(held.items()) if reason.startswith(ANOMALY_HELD)]


# Every condition must return nothing for the verification to pass.
VERIFY_CONDITIONS: tuple[Callable[[VerifyEvidence], list[str]], ...] = (
    repair_run_succeeded,
    repair_checks_passed,
    controls_match_raw,
    dashboards_match_governed,
    owner_decided_held_restatements,
    owner_decided_anomaly_holds,
)
