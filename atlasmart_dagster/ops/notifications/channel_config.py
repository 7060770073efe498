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
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

from ...errors import UsageError
from ...store.home import AtlasmartHome

NOTIFICATIONS_ENV = "ATLASMART_NOTIFICATIONS"
CONFIG_FILENAME = "notifications.yaml"

WEBHOOK, PAGERDUTY, EMAIL = "webhook", "pagerduty", "email"
KINDS = (WEBHOOK, PAGERDUTY, EMAIL)
PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
PAGERDUTY_SEVERITIES = ("critical", "error", "warning", "info")
ONCALL = "oncall"

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_BACKOFF_S = 60.0
DEFAULT_BACKOFF_MAX_S = 3600.0
# Events older than this when first seen are not announced: a channel added to a
# home with a long history must not replay it (a failed delivery is retried whatever its age).
DEFAULT_MAX_AGE_H = 24.0

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ADDRESS = re.compile(r"[^@\s]+@[^@\s]+")


class NotificationConfigError(UsageError):
    """The notification configuration is wrong: nothing is sent until it is fixed."""


@dataclass(frozen=True)
class Channel:
    """One channel: where messages go, how long a send may take, and the names of the variables holding secrets."""

    name: str
    kind: str
    timeout_s: float
    url: str | None = None  # webhook, pagerduty
    url_env: str | None = None  # webhook: the variable holding the URL
    routing_key_env: str | None = None  # pagerduty
    severity: str = "error"  # pagerduty: the severity of a triggered alert
    source: str | None = None  # pagerduty: payload.source (default: atlasmart on this host)
    host: str | None = None  # email
    port: int = 25
    sender: str | None = None
    to: tuple[str, ...] = ()  # email: the on-call route's recipients (a consumer group's contact otherwise)
    starttls: bool = False
    username_env: str | None = None
    password_env: str | None = None

    def secret_names(self) -> tuple[str, ...]:
        """The environment variables this channel reads secrets from."""
        return tuple(n for n in (self.url_env, self.routing_key_env, self.username_env, self.password_env) if n)

    def secret_values(self) -> list[str]:
        """The secrets themselves, as set now (to scrub them from any error text before it is recorded)."""
        return [v for v in (os.environ.get(n) for n in self.secret_names()) if v]

    def describe(self) -> dict[str, Any]:
        """What the channel is, without any secret (for ``atlasmart notify`` and its JSON)."""
        where = {WEBHOOK: f"${self.url_env}" if self.url_env else _without_credentials(self.url or ""),
                 PAGERDUTY: f"{self.url} (routing key ${self.routing_key_env})",
                 EMAIL: f"{self.host}:{self.port}{' STARTTLS' if self.starttls else ''} from {self.sender}"}[self.kind]
        return {"channel": self.name, "kind": self.kind, "to": where, "timeout_s": self.timeout_s}


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
    chosen = os.environ.get(NOTIFICATIONS_ENV)
    return Path(chosen).expanduser().resolve() if chosen else home.root / CONFIG_FILENAME


def load_config(home: AtlasmartHome) -> NotificationConfig | None:
    """The deployment's configuration; None when there is no file (and the variable names none)."""
    path = config_path(home)
    if not path.is_file():
        if os.environ.get(NOTIFICATIONS_ENV):
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
    _mapping(data, path, "the file")
    _keys(data, ("channels", "routes", "delivery"), path, "the file")
    channels_data = data.get("channels") or {}
    _mapping(channels_data, path, "channels")
    channels = {str(name): _channel(str(name), spec, path) for name, spec in channels_data.items()}
    routes = data.get("routes") or {}
    _mapping(routes, path, "routes")
    _keys(routes, (ONCALL, "consumers", "consumer_groups"), path, "routes")
    oncall = _route(routes.get(ONCALL), channels, path, f"routes.{ONCALL}")
    consumers = _route(routes.get("consumers"), channels, path, "routes.consumers")
    groups_data = routes.get("consumer_groups") or {}
    _mapping(groups_data, path, "routes.consumer_groups")
    groups = {str(g): _route(names, channels, path, f"routes.consumer_groups.{g}") for g, names in groups_data.items()}
    mute = [n for n in oncall if channels[n].kind == EMAIL and not channels[n].to]
    if mute:
        raise NotificationConfigError(f"{path}: routes.{ONCALL} names the email channel {mute[0]}, which has no to: "
                                      f"give it the on-call addresses (consumer routes mail each group's contact)")
    consumer_routes = [("routes.consumers", consumers),
                       *((f"routes.consumer_groups.{g}", names) for g, names in groups.items())]
    for where, names in consumer_routes:
        paging = [n for n in names if channels[n].kind == PAGERDUTY]
        if paging:
            raise NotificationConfigError(f"{path}: {where} names the pagerduty channel {paging[0]}: PagerDuty pages "
                                          f"on-call, so it belongs in routes.{ONCALL} only")
    return NotificationConfig(path, channels, oncall, consumers, groups, _delivery(data.get("delivery") or {}, path))


def _channel(name: str, spec: Any, path: Path) -> Channel:
    where = f"channels.{name}"
    _mapping(spec, path, where)
    kind = spec.get("kind")
    if kind not in KINDS:
        raise NotificationConfigError(f"{path}: {where} has kind {kind!r}; a channel's kind is one of "
                                      f"{', '.join(KINDS)}")
    common = ("kind", "timeout_s")
    timeout = _number(spec.get("timeout_s", DEFAULT_TIMEOUT_S), path, f"{where}.timeout_s", low=0.1, high=60)
    if kind == WEBHOOK:
        _keys(spec, (*common, "url", "url_env"), path, where)
        url, url_env = spec.get("url"), _env_name(spec.get("url_env"), path, f"{where}.url_env")
        if bool(url) == bool(url_env):
            raise NotificationConfigError(f"{path}: {where} needs its URL: url_env (the environment variable that "
                                          f"holds it; a Slack webhook URL is a secret) or url, not both")
        if url_env and os.environ.get(url_env):  # the value is a secret: only its scheme may be named
            _url(os.environ[url_env], path, f"{where}.url_env: ${url_env}")
        return Channel(name, kind, timeout, url=_url(url, path, f"{where}.url") if url else None, url_env=url_env)
    if kind == PAGERDUTY:
        _keys(spec, (*common, "url", "routing_key_env", "routing_key", "severity", "source"), path, where)
        if "routing_key" in spec:
            raise NotificationConfigError(f"{path}: {where} holds a routing_key: never put a secret in the file; "
                                          f"name the environment variable that holds it (routing_key_env)")
        key_env = _env_name(spec.get("routing_key_env"), path, f"{where}.routing_key_env")
        if key_env is None:
            raise NotificationConfigError(f"{path}: {where} needs routing_key_env, the environment variable that "
                                          f"holds the PagerDuty integration's routing key")
        severity = spec.get("severity", "error")
        if severity not in PAGERDUTY_SEVERITIES:
            raise NotificationConfigError(f"{path}: {where}.severity is {severity!r}; PagerDuty takes one of "
                                          f"{', '.join(PAGERDUTY_SEVERITIES)}")
        return Channel(name, kind, timeout, url=_url(spec.get("url") or PAGERDUTY_EVENTS_URL, path, f"{where}.url"),
                       routing_key_env=key_env, severity=severity, source=spec.get("source"))
    _keys(spec, (*common, "host", "port", "from", "to", "starttls", "username_env", "password_env", "password"),
          path, where)
    if "password" in spec:
        raise NotificationConfigError(f"{path}: {where} holds a password: never put a secret in the file; name the "
                                      f"environment variable that holds it (password_env)")
    for required in ("host", "from"):
        if not spec.get(required):
            raise NotificationConfigError(f"{path}: {where} needs {required} (an email channel needs host, port and "
                                          f"from; to for the on-call route)")
    sender = str(spec["from"])
    to = spec.get("to") or []
    to = [to] if isinstance(to, str) else to
    if not isinstance(to, list) or not all(isinstance(a, str) and _ADDRESS.fullmatch(a) for a in [sender, *to]):
        raise NotificationConfigError(f"{path}: {where}: from and to must be email addresses (to: one or a list)")
    username_env = _env_name(spec.get("username_env"), path, f"{where}.username_env")
    password_env = _env_name(spec.get("password_env"), path, f"{where}.password_env")
    if bool(username_env) != bool(password_env):
        raise NotificationConfigError(f"{path}: {where} needs both username_env and password_env, or neither")
    starttls = spec.get("starttls", False)
    if not isinstance(starttls, bool):
        raise NotificationConfigError(f"{path}: {where}.starttls is true or false, not {starttls!r}")
    port = int(_number(spec.get("port", 25), path, f"{where}.port", low=1, high=65535))
    return Channel(name, kind, timeout, host=str(spec["host"]), port=port, sender=sender, to=tuple(to),
                   starttls=starttls, username_env=username_env, password_env=password_env)


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
    _mapping(spec, path, "delivery")
    _keys(spec, ("max_attempts", "backoff_s", "backoff_max_s", "max_age_h"), path, "delivery")
    attempts = _number(spec.get("max_attempts", DEFAULT_MAX_ATTEMPTS), path, "delivery.max_attempts", low=1, high=100)
    if attempts != int(attempts):
        raise NotificationConfigError(f"{path}: delivery.max_attempts is a whole number, not {attempts}")
    return Delivery(
        max_attempts=int(attempts),
        backoff_s=_number(spec.get("backoff_s", DEFAULT_BACKOFF_S), path, "delivery.backoff_s", low=0, high=86400),
        backoff_max_s=_number(spec.get("backoff_max_s", DEFAULT_BACKOFF_MAX_S), path, "delivery.backoff_max_s", low=0,
                              high=7 * 86400),
        max_age_h=_number(spec.get("max_age_h", DEFAULT_MAX_AGE_H), path, "delivery.max_age_h", low=0, high=24 * 366),
    )


def _mapping(value: Any, path: Path, where: str) -> None:
    if not isinstance(value, dict):
        raise NotificationConfigError(f"{path}: {where} must be a mapping of names to settings, not "
                                      f"{type(value).__name__}")


def _keys(spec: Mapping[str, Any], allowed: tuple[str, ...], path: Path, where: str) -> None:
    unknown = [str(k) for k in spec if k not in allowed]
    if unknown:
        raise NotificationConfigError(f"{path}: {where} has the unknown setting {unknown[0]!r} (known: "
                                      f"{', '.join(allowed)})")


def _number(value: Any, path: Path, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise NotificationConfigError(f"{path}: {where} must be a number from {low:g} to {high:g}, not {value!r}")
    return float(value)


def _env_name(value: Any, path: Path, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise NotificationConfigError(f"{path}: {where} is the name of an environment variable (letters, digits, "
                                      f"_), not {value!r}")
    return value


def _url(value: Any, path: Path, where: str) -> str:
    parts = urlsplit(str(value).strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        shown = f"the scheme {parts.scheme}:" if parts.scheme else "no scheme"
        raise NotificationConfigError(f"{path}: {where} must be an http:// or https:// URL with a host, not one with "
                                      f"{shown}{'' if parts.hostname else ' and no host'}; nothing is sent until "
                                      f"it is fixed")
    return str(value)


def _without_credentials(url: str) -> str:
    """A URL as it may be shown: scheme, host and port only (a webhook's path is its token)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}/…"
