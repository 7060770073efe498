"""Delivering the outbox: what is due is sent, every attempt is recorded, and a dead channel never stops the caller.

``deliver_pending`` is the one entry point (the incident sensor's tick and the
commands that change incidents call it). It computes the outbox from the
ledger, and for every (message, channel) whose delivery record says it is
due sends it once: never attempted and recent (``delivery.max_age_h``), or
failed before and past its next attempt time. Each attempt appends its
outcome: ``SENT``; ``FAILED`` with the reason and the next attempt time
(``backoff_s`` doubling per attempt, capped at ``backoff_max_s``); or
``GAVE_UP`` after ``max_attempts``, or at once when the receiver refused the
message itself.

A channel that fails once in a call is not tried again in that call: its
other due messages wait for the next call (``deferred``), so a dead channel
costs one timeout per call, not one per message. Nothing is held while a
message is sent (no ledger transaction, so loads and certification never
wait on a channel), and nothing raises: configuration errors, a busy lock, a
ledger that cannot be written, anything unexpected, end up in the report.
One delivery runs at a time per deployment (a named lock of the home); a
call that finds it busy leaves the work to the one running.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import dagster as dg

from ....errors import LaneViolation
from ....product.pii import redact_for
from ....store.clock import format_ts
from ....store.ledger.notification_deliveries import FAILED, FINAL, GAVE_UP, SENT, due
from ....store.locks import home_lock
from ....store.platform import Platform
from .channel_config import ONCALL, Channel, NotificationConfig, NotificationConfigError, load_config
from .channels import SendFailed, Sent, scrub, send
from .message import TEST, Message
from .outbox import Outbox

log = logging.getLogger(__name__)

LOCK_NAME = "notifications"


@dataclass
class DeliveryReport:
    """What one call did: each attempt by message key and channel, and why nothing was done if so."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)  # retried by a later call
    gave_up: list[dict[str, Any]] = field(default_factory=list)
    deferred: list[dict[str, Any]] = field(default_factory=list)  # due; their channel failed earlier in this call
    problem: str | None = None  # the configuration is wrong, another delivery runs, the ledger refused a write...

    def to_json(self) -> dict[str, Any]:
        return {"sent": self.sent, "failed": self.failed, "gave_up": self.gave_up, "deferred": self.deferred,
                "problem": self.problem}

    def line(self) -> str:
        """One line for a sensor's log or a command's output."""
        text = (f"notifications: {len(self.sent)} sent, {len(self.failed)} failed (retried later), "
                f"{len(self.gave_up)} gave up, {len(self.deferred)} waiting")
        return f"{text}; {self.problem}" if self.problem else text


def channels_for(config: NotificationConfig, message: Message) -> list[Channel]:
    """The channels ``message`` goes to: its route's that take it (PagerDuty only an incident's lifecycle, say)."""
    return [c for c in config.channels_of(message.route) if c.impl.can_deliver(c, message) is None]


def deliver_pending(platform: Platform, graph: Any = None, instance: dg.DagsterInstance | None = None,
                    config: NotificationConfig | None = None, now: datetime | None = None) -> DeliveryReport:
    """Send every notification that is due, record each attempt, and report; never raises.

    ``graph``: the code location's resolved asset graph (``defs.resolve_asset_graph()``, or a
    sensor's ``context.repository_def.asset_graph``), which says who reads what; the
    package's own when None. ``instance``: the Dagster instance, to hear of dead runs.
    ``config``: the channels and routes; the deployment's file when None (no file: nothing to do).
    """
    report = DeliveryReport()
    try:
        config = config or load_config(platform.home)
        if config is None or not config.channels:
            return report
        with home_lock(platform.home, LOCK_NAME, wait_seconds=0, label="notification delivery"):
            _deliver(platform, config, graph, instance, now or platform.clock.now(), report)
    except NotificationConfigError as exc:
        report.problem = f"nothing sent: {exc}"
    except LaneViolation:
        report.problem = "another process is delivering notifications now: what is due is left to it"
    except Exception as exc:  # noqa: BLE001 - a notification problem must never stop a load, a sensor or a command
        secrets = [s for c in (config.channels.values() if config else ()) for s in c.secret_values()]
        report.problem = scrub(f"delivery stopped: unexpected {type(exc).__name__}: {exc}", secrets)
    if report.problem:
        log.warning(report.problem)
    return report


def _deliver(platform: Platform, config: NotificationConfig, graph: Any, instance: dg.DagsterInstance | None,
             now: datetime, report: DeliveryReport) -> None:
    deliveries = platform.ledger.notifications
    latest = deliveries.latest()
    open_keys = {key for (key, _), row in latest.items() if row["outcome"] not in FINAL}
    outbox = Outbox(platform, now, timedelta(hours=config.delivery.max_age_h), instance, graph)
    messages = outbox.messages(wanted=lambda prefix: any(k.startswith(prefix) for k in open_keys))
    if outbox.groups is not None:  # the graph was read: a route naming a group it does not have is refused
        config.check_groups({g.name for g in outbox.groups})
    clean = None
    failed_now: set[str] = set()
    for message in messages:
        for channel in channels_for(config, message):
            row = latest.get((message.key, channel.name))
            if (row is None and not message.fresh) or not due(row, now):
                continue
            entry = {"key": message.key, "channel": channel.name, "route": message.route, "kind": message.kind}
            if channel.name in failed_now:
                report.deferred.append(entry)
                continue
            if clean is None:
                clean = redact_for(platform)  # built once, and only when something is sent
            attempt = (row["attempt"] if row else 0) + 1
            try:
                send(channel, message.redacted(clean))
            except SendFailed as exc:
                if not exc.permanent:  # a refused message says nothing of the channel: its others still go
                    failed_now.add(channel.name)
                last = exc.permanent or attempt >= config.delivery.max_attempts
                retry_at = None if last else now + timedelta(seconds=config.delivery.backoff(attempt))
                deliveries.record(message.key, channel.name, message.route, message.kind, GAVE_UP if last else FAILED,
                                  attempt, now, error=exc.reason, next_attempt_at=retry_at)
                entry = {**entry, "attempt": attempt, "error": exc.reason}
                if last:
                    report.gave_up.append(entry)
                    log.error(f"notification {message.key} over {channel.name}: gave up after attempt {attempt}: "
                              f"{exc.reason}")
                else:
                    report.failed.append({**entry, "next_attempt_at": format_ts(retry_at)})
                    log.warning(f"notification {message.key} over {channel.name} failed (attempt {attempt}), "
                                f"retried from {format_ts(retry_at)}: {exc.reason}")
                continue
            deliveries.record(message.key, channel.name, message.route, message.kind, SENT, attempt, now)
            report.sent.append({**entry, "attempt": attempt})


def send_test(platform: Platform, config: NotificationConfig, channel_name: str, to: str | None = None) -> list[Sent]:
    """Send a test message over one channel now (nothing is recorded); ``SendFailed`` says why it did not go.

    ``to`` is the test's recipient. What a test is, is the channel kind's: a PagerDuty test triggers an ``info``
    alert and resolves it at once, so nobody stays paged.
    """
    channel = config.channels.get(channel_name)
    if channel is None:
        raise NotificationConfigError(f"no channel {channel_name!r} in {config.path} (channels: "
                                      f"{', '.join(config.channels) or 'none'})")
    at = format_ts(platform.clock.now())
    message = Message(
        key=f"{TEST}:{uuid.uuid4().hex[:12]}", route=ONCALL, kind=TEST, at=at, fresh=True,
        headline="AtlasMart test message",
        summary=f"channel {channel_name} works (atlasmart notify test, {at})",
        facts=(("Channel", channel_name), ("Kind", channel.kind), ("At", at)),
        text="Nothing happened: this message only shows that the channel reaches you.",
        recipient=to,
        details={"test": True, "channel": channel_name},
    )
    refused = channel.impl.can_deliver(channel, message)
    if refused:
        raise NotificationConfigError(f"channel {channel_name} {refused}"
                                      + ("; give the test one with --to" if to is None else ""))
    return [send(c, m) for c, m in channel.impl.test_messages(channel, message)]
