"""``kind: pagerduty``: PagerDuty Events API v2, for on-call only; an incident's lifecycle is one alert.

The event action is derived from the message kind (``ACTIONS``): an incident
opened and new evidence trigger (update) the alert, a change of state
acknowledges it, the resolution resolves it, under the incident id as the
``dedup_key``. Every other message (withdrawals, holds, dead runs) is not
sent here: those open incidents, and page through them. A test triggers an
``info`` alert and resolves it at once, so nobody stays paged.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, replace
from typing import Any

from ..channels import SendFailed, Sent, post_json, secret
from ..message import INCIDENT_EVIDENCE, INCIDENT_OPENED, INCIDENT_RESOLVED, INCIDENT_STATUS, ONCALL, TEST, Message
from .base import BaseKind, ChannelSettings, Entry

EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
SEVERITIES = ("critical", "error", "warning", "info")
TRIGGER, ACKNOWLEDGE, RESOLVE = "trigger", "acknowledge", "resolve"
_TEST_RESOLVED = "test_resolved"  # the second message of a test: resolves the alert the test triggered
# The event action of each message kind PagerDuty takes.
ACTIONS = {INCIDENT_OPENED: TRIGGER, INCIDENT_EVIDENCE: TRIGGER, INCIDENT_STATUS: ACKNOWLEDGE,
           INCIDENT_RESOLVED: RESOLVE, TEST: TRIGGER, _TEST_RESOLVED: RESOLVE}


@dataclass(frozen=True)
class PagerDutySettings(ChannelSettings):
    routing_key_env: str
    url: str = EVENTS_URL
    severity: str = "error"  # the severity of a triggered alert
    source: str | None = None  # payload.source (default: atlasmart on this host)


class PagerDuty(BaseKind):
    name = "pagerduty"

    def parse(self, entry: Entry) -> PagerDutySettings:
        entry.keys("url", "routing_key_env", "routing_key", "severity", "source")
        entry.no_secret("routing_key", "routing_key_env")
        key_env = entry.env_name("routing_key_env")
        if key_env is None:
            raise entry.error(f"{entry.where} needs routing_key_env, the environment variable that holds the "
                              f"PagerDuty integration's routing key")
        severity = entry.get("severity", "error")
        if severity not in SEVERITIES:
            raise entry.error(f"{entry.where}.severity is {severity!r}; PagerDuty takes one of "
                              f"{', '.join(SEVERITIES)}")
        return PagerDutySettings(routing_key_env=key_env, url=entry.url(entry.get("url") or EVENTS_URL,
                                                                         f"{entry.where}.url"),
                                 severity=severity, source=entry.get("source"))

    def describe(self, settings: PagerDutySettings) -> str:
        return f"{settings.url} (routing key ${settings.routing_key_env})"

    def refuse_route(self, channel, route: str) -> str | None:
        if route != ONCALL:
            return f": PagerDuty pages on-call, so it belongs in routes.{ONCALL} only"
        return None

    def can_deliver(self, channel, message: Message) -> str | None:
        return None if message.kind in ACTIONS else "PagerDuty takes an incident's lifecycle only"

    def send(self, channel, message: Message) -> Sent:
        settings: PagerDutySettings = channel.settings
        if message.kind not in ACTIONS:
            raise SendFailed(f"PagerDuty takes an incident's lifecycle only, not a {message.kind} message",
                             permanent=True)
        key = secret(settings.routing_key_env, channel, "routing key")
        body = pagerduty_payload(message, settings, key)
        post_json(settings.url, body, channel.timeout_s)
        return Sent(channel.name, channel.kind, {**body, "routing_key": f"${settings.routing_key_env}"})

    def test_messages(self, channel, message: Message) -> list[tuple[Any, Message]]:
        quiet = replace(channel, settings=replace(channel.settings, severity="info"))
        alert = replace(message, incident_id=message.key)
        return [(quiet, alert), (quiet, replace(alert, kind=_TEST_RESOLVED))]


def pagerduty_payload(message: Message, settings: PagerDutySettings, routing_key: str) -> dict[str, Any]:
    """A PagerDuty Events API v2 event; the incident id is the dedup key, so resolve closes what trigger opened."""
    action = ACTIONS[message.kind]
    event: dict[str, Any] = {"routing_key": routing_key, "event_action": action,
                             "dedup_key": message.incident_id or message.key}
    if action == TRIGGER:
        event["payload"] = {
            "summary": f"{message.headline}: {message.summary}"[:1024],
            "severity": settings.severity,
            "source": settings.source or f"atlasmart on {socket.gethostname()}",
            "timestamp": message.at,
            "component": "atlasmart",
            "group": "daily sales data product",
            "class": message.kind,
            "custom_details": message.details,
        }
        event["client"] = "AtlasMart"
    return event


KIND = PagerDuty()
