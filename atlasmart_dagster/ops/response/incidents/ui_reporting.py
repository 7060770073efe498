"""Incidents in the Dagster UI, on the assets and days they affect.

An incident lives in the ledger; this module shows it where Dagster users
look, each time it is opened or changes (new evidence, triage, containment,
a consumer notice, repair, verification, resolution):

* an ``AssetObservation`` on every asset the incident affects, one per
  day for the daily assets (one for the others, naming the days): the
  incident's id and status, the triage verdict, the impact and what
  consumers are served now in the notices' words (``notices.py``), the
  latest consumer notice, and every incident still open on that asset and
  day. The assets are the blast radius recorded by triage (every one ever
  recorded, so a narrowed radius leaves nothing open behind), the assets the
  evidence and containment name (the origin), and always the certified
  products and their ``served_*`` assets. The resolution is observed on the
  same assets, so the newest observation of an asset and day never shows as
  open an incident that is closed;
* the non-blocking ``open_incidents`` check (WARN) on each ``served_*``
  asset, failing while an incident affecting the product is open, listing
  them with their days. Reported when an incident changes, and again after
  every change of the served days (``refresh_open_incidents``, which
  ``report_day_states`` calls) unless its newest evaluation is a runless one
  saying the same: an evaluation executed in a run (*Execute all*) names the
  materialization it saw, and the UI reads "Not Evaluated" once the served
  asset is materialized again.

Why both, from Dagster 1.13's UI. The asset's *Events* tab lists every
observation, runless ones too, with its day, its description rendered as
Markdown and its metadata: the incident's history on the asset. A day's page
(*Partitions* tab) shows the newest materialization's metadata merged with
that of the observations newer than it, one row per label, newest first:
the incident id and status sit in the day's own metadata table, under the
served version, when the day is materialized; a day that never materialized
(stopped upstream, withdrawn) shows an observation only behind *View all
historical events*. An observation changes no status: the graph, the catalog
and the asset's health show nothing of it. A failed check does: a WARN check
turns the asset's health and its node in the graph yellow, so the served
assets say "an incident is open" to anyone who passes by, and the
observations say which days and what happened. The check's evaluations name
no Dagster partition, for the reason ``certification_checks.py`` gives: a
runless evaluation per day could be written only once (Dagster's check index
is unique per check, run and partition, and every runless event has the same
empty run id); one evaluation per served asset lists every open incident and
its days instead.

Nothing is written twice. Each observation carries the incident event it
shows (``incident_event``), and an incident is shown again only when its
newest shown event (notes and postmortem actions are not shown) differs from
what its markers say: the last observation written for it on each served asset.
The instance is asked, not a ledger cursor, because what was shown is a fact
of the instance: a new or restored Dagster home is shown everything, and a
withdrawal, which wipes a served asset's events whole (``served.py``), wipes
its marker with them, so the next call shows the incident again. Open
incidents are looked at on every call (one query each); resolved ones only
when they changed after ``after_event_id`` (the sensor's cursor).
"""

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import dagster as dg

from ....defs.assets.served import SERVED_ASSETS, product_of, served_asset
from ....defs.checks.certification_checks import after_days_changed
from ....defs.checks.open_incidents import OPEN_INCIDENTS
from ....defs.checks.said import report_unless_said
from ....defs.partitions import daily_partitions
from ....store.ledger.day_states import DayStates
from ....store.ledger.incidents import RESOLVED, Incident, IncidentStore, UnknownIncident
from ....store.platform import Platform
from ....store.tables import CERTIFIED_ASSETS, DAILY_CHAIN
from .notices import build_notice, product_name


# Metadata labels of an incident observation.
INCIDENT = "incident"
INCIDENT_STATUS = "incident_status"
INCIDENT_EVENT = "incident_event"

# Events that change nothing a consumer or an on-call engineer reads on an asset.
NOT_SHOWN = ("note", "postmortem_action", "action_done")



@dataclass
class IncidentsShown:
    """What one call wrote to the instance, and the newest incident event it looked at (the sensor's cursor)."""

    observations: list[dg.AssetObservation] = field(default_factory=list)
    evaluations: list[dg.AssetCheckEvaluation] = field(default_factory=list)
    incidents: list[str] = field(default_factory=list)
    last_event_id: int = 0


def last_change(incident: Incident) -> int:
    """The id of the newest event of the incident that the UI shows."""
    return max((e["id"] for e in incident.events if e["kind"] not in NOT_SHOWN), default=0)


def affected_assets(incident: Incident) -> list[str]:
    """Every asset the incident is shown on, in graph order, the served assets last.

    Cumulative: every blast radius and every scope ever recorded, so an asset
    shown as affected once is shown the incident's later states too.
    """
    names: list[str] = []
    for event in incident.events:
        if event["kind"] == "blast_radius":
            names += [a["asset"] for a in event["data"].get("assets", [])]
        elif event["kind"] == "scope":
            names += event["data"].get("assets", [])
        elif event["kind"] == "signal" and event["data"].get("asset"):
            names.append(event["data"]["asset"])
    names += CERTIFIED_ASSETS
    names += [served_asset(p) for p in CERTIFIED_ASSETS]
    ordered = list(dict.fromkeys(names))
    return [a for a in ordered if a not in SERVED_ASSETS] + [a for a in ordered if a in SERVED_ASSETS]


def affected_days(incident: Incident) -> list[str]:
    """Every day the incident's evidence and scopes ever named (cumulative, like ``affected_assets``)."""
    days = set(incident.partitions)
    for event in incident.of_kind("scope"):
        days.update(event["data"].get("partitions", []))
    return sorted(days)


def _daily(asset: str) -> bool:
    return asset in DAILY_CHAIN or asset in SERVED_ASSETS


def targets(incident: Incident) -> list[tuple[str, str | None]]:
    """(asset, day) pairs the incident is observed on, in the order they are written (see ``markers``)."""
    days = [d for d in affected_days(incident) if daily_partitions.has_partition_key(d)]
    out: list[tuple[str, str | None]] = []
    for asset in affected_assets(incident):
        if _daily(asset) and days:
            out += [(asset, day) for day in days]
        else:
            out.append((asset, None))
    return out


def markers(incident: Incident) -> list[tuple[str, str | None]]:
    """The last (asset, day) written of each served asset: all say the incident's last change once it is shown.

    A withdrawal wipes one served asset's events (``served.py``), so each
    served asset is asked; the other assets' observations are never wiped.
    """
    last = {asset: (asset, day) for asset, day in targets(incident) if asset in SERVED_ASSETS}
    return list(last.values())


def _text(value: Any) -> str | None:
    return None if value is None else str(value.value)


def _shown_change(instance: dg.DagsterInstance, incident_id: str, marker: tuple[str, str | None]) -> str | None:
    """The ``incident_event`` of the newest observation of ``incident_id`` on ``marker``, or None if there is none."""
    asset, day = marker
    records_filter = dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[day] if day else None)
    cursor = None
    while True:  # newest first; other incidents' observations of the same day come between
        result = instance.fetch_observations(records_filter, limit=100, cursor=cursor)
        for record in result.records:
            observation = record.asset_observation
            if observation is not None and _text(observation.metadata.get(INCIDENT)) == incident_id:
                return _text(observation.metadata.get(INCIDENT_EVENT))
        if not result.has_more:
            return None
        cursor = result.cursor


@dataclass(frozen=True)
class _State:
    """What the UI says of one incident now, in the notices' words."""

    incident: Incident
    targets: list[tuple[str, str | None]]
    verdict: str | None
    impact: str
    impact_per_day: dict[str, str]
    day_status: dict[str, str]
    notice: str | None  # the latest consumer notice issued, as Markdown

    @classmethod
    def of(cls, platform: Platform, incident: Incident) -> "_State":
        stage = "resolved" if incident.status == RESOLVED else "update"
        # Only the parts computed from the evidence are used: summary, repair and next update are the operator's.
        words = build_notice(platform, incident, stage=stage, summary="", repair="", next_update="", restated=False)
        triage = incident.latest("triage")
        notice = incident.latest("notice")
        return cls(incident, targets(incident), triage["data"]["verdict"] if triage else None, words["impact"],
                   words["impact_per_day"], words["day_status"], notice["data"].get("markdown") if notice else None)

    def assets(self) -> set[str]:
        return {asset for asset, _ in self.targets}

    def served_now(self, day: str | None) -> str:
        days = [day] if day else sorted(self.day_status)
        if not days:
            return f"data is {self.impact}"
        return "; ".join(f"{d}: {self.day_status.get(d, 'not known')}" for d in days)

    def summary(self) -> dict[str, Any]:
        return {"status": self.incident.status, "title": self.incident.title, "days": affected_days(self.incident),
                "triage_verdict": self.verdict, "impact": self.impact, "served_now": self.day_status}


def _served_version(states: DayStates, asset: str, day: str | None) -> str | None:
    """For a certified product or its served asset and a day: the version consumers read, in words."""
    product = product_of(asset)
    if day is None or product not in CERTIFIED_ASSETS:
        return None
    served = states.served(product, day)
    if served is None:
        return f"{product_name(product)}: nothing served for {day}"
    return f"{product_name(product)}: version {served.version}, certified {served.certified_at}"


def _open_on(open_states: Iterable[_State], asset: str, day: str | None) -> list[str]:
    """The open incidents shown on ``asset`` for ``day`` (for any day when the observation names none)."""
    return [s.incident.id for s in open_states if ((asset, day) in s.targets if day else asset in s.assets())]


def _observation(platform: Platform, states: DayStates, state: _State, asset: str, day: str | None,
                 open_states: Sequence[_State]) -> dg.AssetObservation:
    incident = state.incident
    served_now = state.served_now(day)
    version = _served_version(states, asset, day)
    open_here = _open_on(open_states, asset, day)
    impact = state.impact_per_day.get(day) if day else None
    if impact and incident.status == RESOLVED:
        impact = f"no longer {impact} (resolved)"  # as the resolved notice words the whole incident
    change = last_change(incident)
    metadata: dict[str, Any] = {
        INCIDENT: dg.MetadataValue.text(incident.id),
        INCIDENT_STATUS: dg.MetadataValue.text(incident.status),
        "incident_title": dg.MetadataValue.text(incident.title),
        "triage_verdict": dg.MetadataValue.text(state.verdict or "not triaged yet"),
        "impact": dg.MetadataValue.text(impact or state.impact),
        "served_now": dg.MetadataValue.text(served_now),
        "open_incidents": dg.MetadataValue.text(", ".join(open_here) or "none"),
        "consumer_notice": (dg.MetadataValue.md(state.notice) if state.notice
                            else dg.MetadataValue.text(f"none issued yet (atlasmart incident notify {incident.id})")),
        "incident_updated_at": dg.MetadataValue.text(next(e["at"] for e in incident.events if e["id"] == change)),
        # text, not a number: the UI plots numeric metadata, and a plot of event ids says nothing
        INCIDENT_EVENT: dg.MetadataValue.text(str(change)),
        "details": dg.MetadataValue.text(f"atlasmart incident show {incident.id}"),
    }
    if version:
        metadata["served_version"] = dg.MetadataValue.text(version)
    if day is None and affected_days(incident):
        metadata["days"] = dg.MetadataValue.text(", ".join(affected_days(incident)))
    others = [i for i in open_here if i != incident.id]
    verdict = f" ({state.verdict})" if state.verdict else ""
    lines = [f"**{incident.id} {incident.status}**{verdict}: {incident.title}", "",
             f"Consumers are served now: {served_now}" + (f" ({version})" if version else "")]
    if others:
        lines += ["", f"Also open on this {'day' if day else 'asset'}: {', '.join(others)}"]
    return dg.AssetObservation(asset_key=dg.AssetKey(asset), partition=day, metadata=metadata,
                               description="\n".join(lines))


def open_incidents_evaluation(served: str, states: Sequence[_State]) -> dg.AssetCheckEvaluation:
    """The ``open_incidents`` evaluation of one served asset from the states of the incidents (open ones count)."""
    here = [s for s in states if s.incident.status != RESOLVED and served in s.assets()]
    if here:  # Markdown: one item per incident
        description = "\n".join(
            f"- **{s.incident.id} {s.incident.status}** ({', '.join(affected_days(s.incident)) or 'no day named'}): "
            f"{s.incident.title}; consumers are served now: {s.served_now(None)}" for s in here)
    else:
        description = "no open incident affects this product"
    metadata: dict[str, Any] = {
        OPEN_INCIDENTS: dg.MetadataValue.text(", ".join(s.incident.id for s in here) or "none"),
        "incidents": dg.MetadataValue.json({s.incident.id: s.summary() for s in here}),
    }
    notices = [s for s in here if s.notice]
    if notices:
        metadata["consumer_notice"] = dg.MetadataValue.md(notices[-1].notice)
    return dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey(served),
        check_name=OPEN_INCIDENTS,
        passed=not here,
        severity=dg.AssetCheckSeverity.WARN,
        metadata=metadata,
        description=description,
        blocking=False,
    )


def _says_same(said: dg.AssetCheckEvaluation, evaluation: dg.AssetCheckEvaluation) -> bool:
    """Whether an ``open_incidents`` evaluation already shown says all ``evaluation`` says (words and metadata)."""
    def values(e: dg.AssetCheckEvaluation) -> dict:
        return {label: getattr(value, "value", value) for label, value in e.metadata.items()}
    return said.passed == evaluation.passed and said.description == evaluation.description and (
        values(said) == values(evaluation))


@after_days_changed  # every report_day_states ends with it
def refresh_open_incidents(
    instance: dg.DagsterInstance | None, platform: Platform, served: Sequence[str] = SERVED_ASSETS
) -> list[dg.AssetCheckEvaluation]:
    """Report each served asset's ``open_incidents`` unless its newest evaluation already says the same.

    Called after the served assets' days changed (``report_day_states``): a
    new served materialization must not leave the check "Not Evaluated" while
    incidents are open, and what consumers are served now (in its description)
    may have changed with it. Returns the evaluations written.
    """
    if instance is None:
        return []
    states = [_State.of(platform, i) for i in IncidentStore(platform.ledger).open_incidents()]
    evaluations = [open_incidents_evaluation(asset, states) for asset in served]
    return [e for e in evaluations if report_unless_said(instance, platform, e, _says_same)]


def show_incidents_in_ui(
    instance: dg.DagsterInstance | None,
    platform: Platform,
    incident_ids: Sequence[str] | None = None,
    after_event_id: int | None = None,
) -> IncidentsShown:
    """Show each incident that changed since the instance last showed it, on every asset and day it affects.

    ``incident_ids`` limits the call to those incidents (a command that just
    changed one); ``after_event_id`` (the sensor's cursor) skips resolved
    incidents with no change after it. Without an instance nothing is shown.
    """
    store = IncidentStore(platform.ledger)
    everything = store.all()
    if incident_ids is None:
        chosen = everything
    else:
        by_id = {i.id: i for i in everything}
        missing = [i for i in incident_ids if i not in by_id]
        if missing:
            raise UnknownIncident(f"no incident {', '.join(missing)} (atlasmart incident list --all)")
        chosen = [by_id[i] for i in dict.fromkeys(incident_ids)]
    newest = max((e["id"] for i in chosen for e in i.events), default=after_event_id or 0)
    shown = IncidentsShown(last_event_id=newest)
    if instance is None:
        return shown
    candidates = [i for i in chosen
                  if i.status != RESOLVED or after_event_id is None or last_change(i) > after_event_id]
    changed = [i for i in candidates
               if any(_shown_change(instance, i.id, marker) != str(last_change(i)) for marker in markers(i))]
    if not changed:
        return shown
    changed_ids = {i.id for i in changed}
    states = {i.id: _State.of(platform, i) for i in everything if i.status != RESOLVED or i.id in changed_ids}
    open_states = [s for s in states.values() if s.incident.status != RESOLVED]
    served = sorted({asset for i in changed for asset in states[i.id].assets() if asset in SERVED_ASSETS})
    # The checks first, the observations after, the served assets' last: a call that stops half-way
    # leaves a marker unwritten, and the next call shows the incident again.
    # A command that changed the incident may have reported the check already (``report_day_states``): once.
    for asset in served:
        evaluation = open_incidents_evaluation(asset, list(states.values()))
        if report_unless_said(instance, platform, evaluation, _says_same):
            shown.evaluations.append(evaluation)
    # What consumers are served on every day the observations name, read once.
    served_days = platform.ledger.partitions.states(
        sorted({day for i in changed for _, day in states[i.id].targets if day}), CERTIFIED_ASSETS)
    for incident in changed:
        state = states[incident.id]
        for asset, day in state.targets:
            observation = _observation(platform, served_days, state, asset, day, open_states)
            instance.report_runless_asset_event(observation)
            shown.observations.append(observation)
        shown.incidents.append(incident.id)
    return shown


def evaluate_open_incidents(platform: Platform, served_assets: Sequence[str]) -> list[dg.AssetCheckEvaluation]:
    """Each served asset's ``open_incidents`` evaluation, from the ledger's open incidents as things stand
    (what *Execute all* runs: ``defs/checks/open_incidents.py``)."""
    states = [_State.of(platform, i) for i in IncidentStore(platform.ledger).open_incidents()]
    return [open_incidents_evaluation(asset, states) for asset in served_assets]
