"""The outbox: what on-call and each consumer group must be told, derived from what the ledger recorded.

Nothing is queued when something happens: every message is computed from the
records themselves, under a key that stays the same however often it is
computed, so the delivery record (``store/ledger/notification_deliveries.py``)
says what was sent and a crash between a send and its record only sends it
again (at least once).

On-call (route ``oncall``) hears about:

* an incident opened, new evidence joining it, every change of its state, and
  its resolution: incident events, keyed ``INC-0001:e12`` (the incident id and
  the event's sequence number in the ledger); PagerDuty gets these as
  trigger / trigger / acknowledge / resolve under the incident id (its
  channel kind derives the action from the message kind, kinds/pagerduty.py);
* certifications withdrawn by a containment (the incident's containment event);
* a day held for its data owner by the anomaly or the restatement guard, keyed
  by the ledger event of the held decision (``hold:p345``);
* a lane blocked by a run whose process died, once ``reap_dead_runs`` marked it
  failed (read from the Dagster instance, keyed by the run id).

Each consumer group (an asset ``consumer_group_*`` with a ``contact`` in its
metadata) gets the consumer notices (``atlasmart incident notify``) that name a
product it reads; which products it reads is what lies upstream of it in the
asset graph. Its message is the notice itself, in consumer words, never the
incident's internal title.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import cache
from typing import Any, Callable, Iterable

import dagster as dg

from ....product.anomaly import ANOMALY_HELD
from ....product.restatements import RESTATEMENT_HELD
from ....store.clock import format_ts, parse_ts
from ....store.ledger.partition_states import CERTIFICATION_REFUSED
from ....store.platform import Platform
from ....store.tables import CERTIFIED_ASSETS
from ....store.ledger.incidents import OPEN, RESOLVED, Incident, IncidentStore
from ..incidents.notices import DEFAULT_PRODUCTS, product_name, to_markdown
from ....defs.automation.run_reaper import WORKER_TAG, is_reaped
from .message import (
    CONSUMER_NOTICE,
    DEAD_RUN,
    HOLD_WAITING,
    INCIDENT_EVIDENCE,
    INCIDENT_OPENED,
    INCIDENT_RESOLVED,
    INCIDENT_STATUS,
    ONCALL,
    WITHDRAWAL,
    Message,
)

CONSUMER_GROUP_PREFIX = "consumer_group_"
# How many of the newest run failures of the Dagster instance are looked at for dead runs.
_RUN_FAILURES_READ = 100
RUNBOOK = "docs/incidents.md"
# Workflow steps whose record is appended just before the state they move the incident to.
_STEPS = ("containment", "verification", "repair")


@dataclass(frozen=True)
class ConsumerGroup:
    """A consumer group of the asset graph: whom to write to, and the products it reads."""

    name: str  # the asset name (never shown to the group)
    description: str  # who they are, in their words (the spec's description)
    contact: str
    products: tuple[str, ...]  # asset names of the certified products and dashboards upstream of it

    @property
    def product_names(self) -> list[str]:
        return list(dict.fromkeys(product_name(p) for p in self.products))


def consumer_groups(graph) -> list[ConsumerGroup]:
    """Every ``consumer_group_*`` asset with a contact, with what it reads (its upstream products) from ``graph``.

    A product is what the notices name for consumers: a certified table or a
    dashboard. ``graph`` is a resolved asset graph (``defs.resolve_asset_graph()``).
    """
    groups = []
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        name = key.to_user_string()
        node = graph.get(key)
        contact = (node.metadata or {}).get("contact")
        if not name.startswith(CONSUMER_GROUP_PREFIX) or not contact:
            continue
        upstream, queue = [], deque(sorted(node.parent_keys, key=lambda k: k.to_user_string()))
        seen = set(queue)
        while queue:
            parent = queue.popleft()
            upstream.append(parent.to_user_string())
            for grand in sorted(graph.get(parent).parent_keys, key=lambda k: k.to_user_string()):
                if grand not in seen:
                    seen.add(grand)
                    queue.append(grand)
        products = tuple(a for a in upstream if a in CERTIFIED_ASSETS or product_name(a) != DEFAULT_PRODUCTS)
        description = (node.description or "").split("\n")[0].strip().rstrip(".")
        groups.append(ConsumerGroup(name, description, str(getattr(contact, "value", contact)), products))
    return groups


@cache
def package_asset_graph():
    """The asset graph of the package's assets, for callers that hold no definitions (built once per process)."""
    from ....defs.assets import package_assets  # local: only when a consumer notice is to be routed

    assets = package_assets()
    # Only the graph is read: the resource the assets need is a placeholder.
    return dg.Definitions(assets=assets, resources={"atlasmart": dg.ResourceDefinition.none_resource()}) \
        .resolve_asset_graph()


# -- on-call messages from the incident record ---------------------------------------
def _event_key(incident_id: str, event: dict[str, Any]) -> str:
    return f"{incident_id}:e{event['id']}"


def _days(values: Iterable[str]) -> str:
    values = sorted(values)
    return ", ".join(values) if values else "none yet"


def _incident_details(incident: Incident) -> dict[str, Any]:
    return {"incident": incident.id, "title": incident.title, "status": incident.status,
            "days": incident.partitions, "assets": incident.assets,
            "evidence": [s.get("detail") for s in incident.signals if s.get("detail")],
            "opened_at": incident.opened_at, "opened_by": incident.opened_by,
            "next": f"atlasmart incident show {incident.id}"}


def incident_messages(incident: Incident, fresh: Callable[[str], bool]) -> list[Message]:
    """The on-call messages of one incident, one per event that changes what on-call must know."""
    out: list[Message] = []
    evidence = [s["detail"] for s in incident.signals if s.get("detail")]
    facts_now = (("Status", incident.status), ("Days", _days(incident.partitions)))
    details = _incident_details(incident)
    previous: dict[str, Any] | None = None
    for event in incident.events:
        common = dict(key=_event_key(incident.id, event), route=ONCALL, at=event["at"], fresh=fresh(event["at"]),
                      incident_id=incident.id, details=details)
        if event["kind"] == "opened":
            at_open = [e["data"]["detail"] for e in incident.of_kind("signal")
                       if e["at"] == event["at"] and e["data"].get("detail")]
            lines = [f"- {d}" for d in (at_open or evidence)]
            out.append(Message(kind=INCIDENT_OPENED, headline=f"{incident.id} opened", summary=incident.title,
                               facts=(("Status", OPEN), ("Days", _days(incident.partitions)),
                                      ("Opened by", event["actor"]), ("At", event["at"])),
                               text="\n".join(["Evidence:", *lines, "", _next_steps(incident.id, OPEN)]), **common))
        elif event["kind"] == "signal" and event["at"] != incident.opened_at:
            out.append(Message(kind=INCIDENT_EVIDENCE, headline=f"{incident.id} updated: new evidence",
                               summary=event["message"], facts=facts_now + (("At", event["at"]),),
                               text=f"New evidence joined {incident.id} ({incident.title}):\n- {event['message']}\n\n"
                                    f"{_next_steps(incident.id, incident.status)}", **common))
        elif event["kind"] == "resolution":
            out.append(Message(kind=INCIDENT_RESOLVED, headline=f"{incident.id} resolved", summary=incident.title,
                               facts=(("Status", RESOLVED), ("Days", _days(incident.partitions)),
                                      ("Resolved by", event["actor"]), ("At", event["at"])),
                               text=f"Resolution: {event['message']}\n\nEvery affected day is certified again; the "
                                    f"record stays in the ledger (atlasmart incident show {incident.id}).", **common))
        elif event["status"] and event["kind"] != "opened":
            # the step that moved the incident says more than the move ("contained: 3 certifications withdrawn")
            why = previous["message"] if previous and previous["kind"] in _STEPS else event["message"]
            out.append(Message(kind=INCIDENT_STATUS, headline=f"{incident.id} is {event['status']}",
                               summary=incident.title,
                               facts=(("Status", event["status"]), ("Days", _days(incident.partitions)),
                                      ("By", event["actor"]), ("At", event["at"])),
                               text=f"What happened: {why}\n\n{_next_steps(incident.id, event['status'])}", **common))
        elif event["kind"] == "containment" and event["data"].get("withdrawn"):
            withdrawn = event["data"]["withdrawn"]
            lines = [f"- {w['asset']} {w['partition']} (version {w['version']})" for w in withdrawn]
            out.append(Message(kind=WITHDRAWAL,
                               headline=f"{incident.id}: {len(withdrawn)} certification"
                                        f"{'s' if len(withdrawn) != 1 else ''} withdrawn",
                               summary=event["message"],
                               facts=(("Days", _days({w["partition"] for w in withdrawn})), ("By", event["actor"]),
                                      ("At", event["at"])),
                               text="\n".join(["Withdrawn (consumers fall back to the previous certified version, or "
                                               "see the day as withdrawn):", *lines, "",
                                               f"Tell consumers: atlasmart incident notify {incident.id} --stage "
                                               f"initial ..."]),
                               **common))
        previous = event
    return out


def _next_steps(incident_id: str, status: str) -> str:
    steps = {
        OPEN: f"Next: atlasmart incident show {incident_id}, then triage and contain (runbook: {RUNBOOK}).",
        "contained": f"Next: atlasmart incident triage {incident_id}, then notify consumers and repair.",
        "identified": f"Next: atlasmart incident repair {incident_id} --from D --to D --reason ...",
        "repairing": f"Next: atlasmart incident verify {incident_id}.",
        "verifying": f"Next: atlasmart incident resolve {incident_id} --summary ... once verification passed.",
    }
    return steps.get(status, f"atlasmart incident show {incident_id}")


# -- on-call messages from the partition record: holds waiting for an owner ------------------
def hold_messages(platform: Platform, incidents: list[Incident], fresh: Callable[[str], bool]) -> list[Message]:
    """A day the anomaly or restatement guard held: its data owner must decide (one message per held run and day)."""
    by_signal = {s.get("key"): i.id for i in incidents for s in i.signals}
    seen, out = set(), []
    for event in platform.ledger.partitions.states(assets=CERTIFIED_ASSETS).events((CERTIFICATION_REFUSED,)):
        reasons = event.detail.get("reasons", [])
        anomaly = next((r for r in reasons if r.startswith(ANOMALY_HELD)), None)
        restatement = next((r for r in reasons if r.startswith(RESTATEMENT_HELD)), None)
        reason = anomaly or restatement
        if reason is None or (event.partition, event.run_id) in seen:
            continue
        seen.add((event.partition, event.run_id))
        day = event.partition
        guard = "anomaly" if anomaly else "restatement"
        incident_id = by_signal.get(f"{guard}:{day}:{event.run_id}")
        if anomaly:
            decide = (f"The data owner decides: atlasmart anomaly approve --partition {day} --owner OWNER --by NAME "
                      f"--reason ... (the held figures are certified), or atlasmart anomaly reject --partition {day} "
                      f"... (the day's batches are retired; it waits for a corrected delivery). Nothing new is "
                      f"published for {day} meanwhile.")
        else:
            decide = (f"The data owner decides: atlasmart restatement approve --partition {day} --owner OWNER --by "
                      f"NAME --reason ..., or retire the re-sent batch (atlasmart batch retire BATCH), then repair. "
                      f"Consumers keep the certified version of {day} meanwhile.")
        facts = [("Day", day), ("Guard", guard), ("At", event.recorded_at)]
        if incident_id:
            facts.append(("Incident", incident_id))
        out.append(Message(key=f"hold:p{event.id}", route=ONCALL, kind=HOLD_WAITING, at=event.recorded_at,
                           fresh=fresh(event.recorded_at), headline=f"{day} held for its data owner",
                           summary=reason, facts=tuple(facts), text=decide, incident_id=incident_id,
                           details={"day": day, "guard": guard, "reason": reason, "run_id": event.run_id,
                                    "incident": incident_id}))
    return out


# -- on-call messages from the Dagster instance: a lane blocked by a dead run ---------------
def dead_run_messages(instance: dg.DagsterInstance, max_age: timedelta) -> list[Message]:
    """Runs ``reap_dead_runs`` marked failed because their process died: each held its lane until then.

    The Dagster instance keeps wall-clock times, so their age is measured on the wall clock.
    """
    since = datetime.now(timezone.utc) - max_age
    out = []
    records = instance.fetch_run_status_changes(dg.DagsterEventType.RUN_FAILURE, limit=_RUN_FAILURES_READ).records
    for record in records:
        entry = record.event_log_entry
        event = entry.dagster_event
        message = (event.message if event is not None else None) or entry.user_message or ""
        if not is_reaped(message):
            continue
        run = instance.get_run_by_id(record.run_id)
        if run is None or WORKER_TAG not in run.tags:
            continue
        at = datetime.fromtimestamp(entry.timestamp, timezone.utc)
        lane = run.tags.get("atlasmart/lane", "unknown")
        start = run.tags.get("dagster/partition") or run.tags.get("dagster/asset_partition_range_start")
        end = run.tags.get("dagster/asset_partition_range_end", start)
        days = start if start == end else f"{start}..{end}"
        out.append(Message(
            key=f"dead_run:{run.run_id}", route=ONCALL, kind=DEAD_RUN, at=format_ts(at), fresh=at >= since,
            headline=f"the {lane} lane was blocked by a dead run",
            summary=f"run {run.run_id} of {run.job_name} ({days or 'no partition'}): {message}",
            facts=(("Lane", lane), ("Job", run.job_name), ("Days", days or "none"), ("Run", run.run_id)),
            text=(f"{message}. The lane is free again. The run's days are loaded again by the next tick or "
                  f"backfill; check them with atlasmart status" + (f" --partition {start}" if start else "") + "."),
            details={"run_id": run.run_id, "job": run.job_name, "lane": lane, "days": days, "reason": message},
        ))
    return out


# -- consumer messages: the notices ---------------------------------------------------------
def notice_events(incidents: list[Incident]) -> list[tuple[Incident, dict[str, Any]]]:
    return [(i, e) for i in incidents for e in i.of_kind("notice")]


def consumer_messages(incident: Incident, event: dict[str, Any], groups: list[ConsumerGroup],
                      fresh: Callable[[str], bool]) -> list[Message]:
    """The notice of ``event`` for every group that reads a product it names (every group when it names none)."""
    notice = {k: v for k, v in event["data"].items() if k != "markdown"}
    markdown = event["data"].get("markdown") or to_markdown(notice)
    affected = notice.get("affected_products") or [DEFAULT_PRODUCTS]
    out = []
    for group in groups:
        reads = group.product_names
        concerned = reads if DEFAULT_PRODUCTS in affected else [p for p in reads if p in affected]
        if not concerned:
            continue
        stage = notice.get("stage", "update")
        intro = (f"To {group.description}: this notice concerns data products you read: {', '.join(concerned)}."
                 if group.description else f"This notice concerns data products you read: {', '.join(concerned)}.")
        out.append(Message(
            key=f"{incident.id}:e{event['id']}:{group.name}", route=group.name, kind=CONSUMER_NOTICE,
            at=event["at"], fresh=fresh(event["at"]), headline=f"Data notice {incident.id} ({stage})",
            summary=notice.get("summary", ""),
            facts=(("Products", ", ".join(notice.get("affected_products") or [DEFAULT_PRODUCTS])),
                   ("Days", _days(notice.get("affected_days") or [])), ("Impact", notice.get("impact") or "")),
            text=f"{intro}\n\n{markdown.strip()}\n",
            incident_id=incident.id, recipient=group.contact,
        ))
    return out


# -- everything ----------------------------------------------------------------------------
@dataclass
class Outbox:
    """Every message the ledger (and the Dagster instance) says is to be told; consumer routing needs the graph."""

    platform: Platform
    now: datetime
    max_age: timedelta
    instance: dg.DagsterInstance | None = None
    graph: Any = None  # a resolved asset graph; the package's own when None
    groups: list[ConsumerGroup] | None = None  # the consumer groups, once a notice needed them

    def fresh(self, at: str) -> bool:
        return parse_ts(at) >= self.now - self.max_age

    def messages(self, wanted: Callable[[str], bool] = lambda prefix: True) -> list[Message]:
        """Every message, oldest first. ``wanted(key prefix)`` says whether a notice's consumer messages are needed
        at all, so the asset graph is resolved only when one is (a notice that is fresh or still being delivered)."""
        incidents = IncidentStore(self.platform.ledger).all()
        out: list[Message] = []
        for incident in incidents:
            out += incident_messages(incident, self.fresh)
        out += hold_messages(self.platform, incidents, self.fresh)
        if self.instance is not None:
            out += dead_run_messages(self.instance, self.max_age)
        notices = [(i, e) for i, e in notice_events(incidents)
                   if self.fresh(e["at"]) or wanted(f"{i.id}:e{e['id']}:")]
        if notices:
            self.groups = consumer_groups(self.graph if self.graph is not None else package_asset_graph())
            for incident, event in notices:
                out += consumer_messages(incident, event, self.groups, self.fresh)
        return sorted(out, key=lambda m: (parse_ts(m.at), m.key))
