"""The notification channels and routes of a deployment, as configuration, checked when it is read.

The file is ``<home>/notifications.yaml``, or the one ``$ATLASMART_NOTIFICATIONS``
names (the team deployment points every machine at one shared file). No file:
no channel, nothing is sent. A file that is wrong is refused as a whole with
one line naming the entry and what to do (``NotificationConfigError``, a usage
error), never half used.

Secrets are never in the file: a channel names the *environment variable*
that holds its PagerDuty routing key, its SMTP credentials or its webhook URL
(a Slack webhook URL is itself a credential), and the value is read from the
environment only when a message is sent. See docs/notifications.md.

A channel's own settings are its kind's to read: the file names a kind the
registry has (``kinds.KINDS``), the common settings (``timeout_s``) are read
here, the rest by the kind's ``parse``, and a route is refused when a kind
says the channel does not belong in it (PagerDuty in a consumer route, an
on-call email channel without recipients).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ....settings import Settings, current
from ....store.home import AtlasmartHome
from .kinds import KINDS, ChannelKind, ChannelSettings, Entry, NotificationConfigError
from .kinds.base import check_keys, check_mapping, number
from .message import ONCALL

NOTIFICATIONS_ENV = Settings.notifications.name
CONFIG_FILENAME = "notifications.yaml"

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_BACKOFF_S = 60.0
DEFAULT_BACKOFF_MAX_S = 3600.0
# Events older than this when first seen are not announced: a channel added to a
# home with a long history must not replay it (a failed delivery is retried whatever its age).
DEFAULT_MAX_AGE_H = 24.0

__all__ = ["ONCALL", "Channel", "NotificationConfig", "NotificationConfigError", "load_config", "parse_config"]


@dataclass(frozen=True)
class Channel:
    """One channel: its name and kind, how long a send may take, the variables holding its secrets, its kind's settings.

    What is particular to a kind (a URL, a routing key, an SMTP server) is in
    ``settings``, the kind's own frozen dataclass (kinds/); what the kind does
    with it is ``impl``, the kind registered under ``kind``.
    """

    name: str
    kind: str
    timeout_s: float
    settings: ChannelSettings
    secrets: tuple[str, ...] = ()  # the environment variables its secrets are read from, when a message is sent

    @property
    def impl(self) -> ChannelKind:
        return KINDS[self.kind]

    def secret_names(self) -> tuple[str, ...]:
        """The environment variables this channel reads secrets from."""
        return self.secrets

    def secret_values(self) -> list[str]:
        """The secrets themselves, as set now (to scrub them from any error text before it is recorded)."""
        return [v for v in (os.environ.get(n) for n in self.secrets) if v] + list(self.settings.written_secrets())

    def describe(self) -> dict[str, Any]:
        """What the channel is, without any secret (for ``atlasmart notify`` and its JSON)."""
        return {"channel": self.name, "kind": self.kind, "to": self.impl.describe(self.settings),
                "timeout_s": self.timeout_s}


@dataclass(frozen=True)
class Delivery:
    """How hard to try: attempts, exponential backoff between them, and how old an event may be to be announced."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff_s: float = DEFAULT_BACKOFF_S
    backoff_max_s: float = DEFAULT_BACKOFF_MAX_S
    max_age_h: float = DEFAULT_MAX_AGE_H

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1, 2, ...): doubling, capped."""
        return min(self.backoff_s * 2 ** (attempt - 1), self.backoff_max_s)


@dataclass(frozen=True)
class NotificationConfig:
    path: Path
    channels: dict[str, Channel]
    oncall: tuple[str, ...]
    consumers: tuple[str, ...]  # the channels of every consumer group
    consumer_groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # per group, instead of ``consumers``
    delivery: Delivery = Delivery()

    def channels_of(self, route: str) -> list[Channel]:
        """The channels of a route: ``oncall``, or a consumer group's asset name."""
        if route == ONCALL:
            names = self.oncall
        else:
            names = self.consumer_groups.get(route, self.consumers)
        return [self.channels[n] for n in names]

    def check_groups(self, known: set[str]) -> None:
        """Refuse a route naming a consumer group the asset graph does not have (known only once it is loaded)."""
        unknown = sorted(set(self.consumer_groups) - known)
        if unknown:
            raise NotificationConfigError(
                f"{self.path}: routes.consumer_groups names {', '.join(unknown)}, which the code location does not "
                f"have: the consumer groups are {', '.join(sorted(known)) or 'none'}")


def config_path(home: AtlasmartHome) -> Path:
    """``$ATLASMART_NOTIFICATIONS``, else ``<home>/notifications.yaml``."""
    chosen = current().notifications
    return Path(chosen).expanduser().resolve() if chosen else home.root / CONFIG_FILENAME


def load_config(home: AtlasmartHome) -> NotificationConfig | None:
    """The deployment's configuration; None when there is no file (and the variable names none)."""
    path = config_path(home)
    if not path.is_file():
        if current().notifications:
            raise NotificationConfigError(f"${NOTIFICATIONS_ENV} names {path}, which is not a file: point it at the "
                                          f"notification configuration, or unset it")
        return None
    return parse_config(path.read_text(encoding="utf-8"), path)


def parse_config(text: str, path: Path) -> NotificationConfig:
    """Check and read a configuration; any mistake is one ``NotificationConfigError`` naming the entry."""
    import yaml  # local: only a deployment with notifications reads YAML here

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise NotificationConfigError(f"{path} is not valid YAML ({' '.join(str(exc).split())})") from None
    if data is None:
        data = {}
    check_mapping(data, path, "the file")
    check_keys(data, ("channels", "routes", "delivery"), path, "the file")
    channels_data = data.get("channels") or {}
    check_mapping(channels_data, path, "channels")
    channels = {str(name): _channel(str(name), spec, path) for name, spec in channels_data.items()}
    routes = data.get("routes") or {}
    check_mapping(routes, path, "routes")
    check_keys(routes, (ONCALL, "consumers", "consumer_groups"), path, "routes")
    oncall = _route(routes.get(ONCALL), channels, path, f"routes.{ONCALL}")
    consumers = _route(routes.get("consumers"), channels, path, "routes.consumers")
    groups_data = routes.get("consumer_groups") or {}
    check_mapping(groups_data, path, "routes.consumer_groups")
    groups = {str(g): _route(names, channels, path, f"routes.consumer_groups.{g}") for g, names in groups_data.items()}
    named = [(f"routes.{ONCALL}", ONCALL, oncall), ("routes.consumers", "consumers", consumers),
             *((f"routes.consumer_groups.{g}", g, names) for g, names in groups.items())]
    for where, route, names in named:
        for channel in (channels[n] for n in names):
            refused = channel.impl.refuse_route(channel, route)
            if refused:
                raise NotificationConfigError(f"{path}: {where} names the {channel.kind} channel {channel.name}"
                                              f"{refused}")
    return NotificationConfig(path, channels, oncall, consumers, groups, _delivery(data.get("delivery") or {}, path))


def _channel(name: str, spec: Any, path: Path) -> Channel:
    where = f"channels.{name}"
    check_mapping(spec, path, where)
    kind = spec.get("kind")
    if kind not in KINDS:
        raise NotificationConfigError(f"{path}: {where} has kind {kind!r}; a channel's kind is one of "
                                      f"{', '.join(KINDS)}")
    timeout = number(spec.get("timeout_s", DEFAULT_TIMEOUT_S), path, f"{where}.timeout_s", low=0.1, high=60)
    entry = Entry(path, name, spec, os.environ)
    settings = KINDS[kind].parse(entry)
    return Channel(name, kind, timeout, settings, secrets=tuple(entry.secrets))


def _route(names: Any, channels: Mapping[str, Channel], path: Path, where: str) -> tuple[str, ...]:
    if names is None:
        return ()
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise NotificationConfigError(f"{path}: {where} is a list of channel names")
    unknown = [n for n in names if n not in channels]
    if unknown:
        raise NotificationConfigError(f"{path}: {where} names the channel {unknown[0]!r}, which channels does not "
                                      f"declare (declared: {', '.join(channels) or 'none'})")
    return tuple(names)


def _delivery(spec: Any, path: Path) -> Delivery:
    check_mapping(spec, path, "delivery")
    check_keys(spec, ("max_attempts", "backoff_s", "backoff_max_s", "max_age_h"), path, "delivery")
    attempts = number(spec.get("max_attempts", DEFAULT_MAX_ATTEMPTS), path, "delivery.max_attempts", low=1, high=100)
    if attempts != int(attempts):
        raise NotificationConfigError(f"{path}: delivery.max_attempts is a whole number, not {attempts}")
    return Delivery(
        max_attempts=int(attempts),
        backoff_s=number(spec.get("backoff_s", DEFAULT_BACKOFF_S), path, "delivery.backoff_s", low=0, high=86400),
        backoff_max_s=number(spec.get("backoff_max_s", DEFAULT_BACKOFF_MAX_S), path, "delivery.backoff_max_s", low=0,
                              high=7 * 86400),
        max_age_h=number(spec.get("max_age_h", DEFAULT_MAX_AGE_H), path, "delivery.max_age_h", low=0, high=24 * 366),
    )
