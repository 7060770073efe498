"""Incidents recorded through the incident store itself, and a configuration for the test's receivers."""

from __future__ import annotations

from pathlib import Path

from atlasmart_dagster.store.ledger.incidents import RESOLVED, Incident, IncidentStore
from atlasmart_dagster.ops.response.notifications.channel_config import NotificationConfig, parse_config
from atlasmart_dagster.store.platform import Platform


def open_incident(platform: Platform, day: str, title: str | None = None) -> Incident:
    """An incident as detection opens one: the opening, then the signal of a failed check of ``day``."""
    store = IncidentStore(platform.ledger)
    at = platform.clock.now()
    incident = store.open(title or f"Check failed: agg_daily_sales:agg_matches_fact for {day}", "incident_sensor", at)
    detail = f"agg_daily_sales:agg_matches_fact failed for {day}"
    store.append(incident.id, at, "incident_sensor", "signal", detail,
                 data={"key": f"check:{incident.id}", "kind": "check_failed", "asset": "agg_daily_sales",
                       "check": "agg_matches_fact", "partition": day, "detail": detail})
    return store.get(incident.id)


def resolve(platform: Platform, incident_id: str, summary: str = "aggregate rebuilt and certified again") -> None:
    IncidentStore(platform.ledger).append(incident_id, platform.clock.now(), "oncall@atlasmart.example",
                                          "resolution", summary, status=RESOLVED)


def config(channels: str, oncall: str, consumers: str = "[]", delivery: str = "{}") -> NotificationConfig:
    """A configuration from YAML fragments: the channels mapping, the two routes and the delivery settings."""
    text = f"channels:\n{channels}\nroutes:\n  oncall: {oncall}\n  consumers: {consumers}\ndelivery: {delivery}\n"
    return parse_config(text, Path("notifications.yaml"))
