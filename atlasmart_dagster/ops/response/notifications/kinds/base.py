"""What a channel kind is: the protocol it implements, its settings, and the reader of its entry in the file.

A kind is one module of this package holding one object that implements
``ChannelKind``: it reads its own settings from its entry (``parse``), says
where its messages go without any secret (``describe``), and sends one message
(``send``). ``BaseKind`` gives the optional members their defaults: every
message on every route is taken, and a test is the test message itself.

What every kind shares stays out of it: the channel's name, kind, timeout and
the names of the variables holding its secrets are the ``Channel`` record's
(channel_config.py); the wall-clock deadline of an attempt, the scrubbing of
secrets from every reason and the turning of any unexpected error into a
failed attempt are ``channels.send``'s, whatever the kind does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from .....errors import UsageError

if TYPE_CHECKING:
    from ..channel_config import Channel
    from ..channels import Sent
    from ..message import Message

COMMON_SETTINGS = ("kind", "timeout_s")  # read for every kind, before its own (channel_config.py)
ADDRESS = re.compile(r"[^@\s]+@[^@\s]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class NotificationConfigError(UsageError):
    """The notification configuration is wrong: nothing is sent until it is fixed."""


@dataclass(frozen=True)
class ChannelSettings:
    """A kind's own settings as its ``parse`` read them: each kind subclasses this with a frozen dataclass."""

    def written_secrets(self) -> tuple[str, ...]:
        """Secrets written in the file itself (a webhook's literal URL), scrubbed like the ones read from variables."""
        return ()


@runtime_checkable
class ChannelKind(Protocol):
    """One kind of channel. Registered in ``kinds.KINDS`` under ``name``, the ``kind:`` of a channel's entry."""

    name: str

    def parse(self, entry: Entry) -> ChannelSettings:
        """The kind's settings from its entry; anything wrong raises ``entry.error(...)``, naming the entry."""

    def describe(self, settings: Any) -> str:
        """Where the messages go, as ``atlasmart notify status`` shows it: never a secret."""

    def send(self, channel: Channel, message: Message) -> Sent:
        """Send one message; ``SendFailed`` with a one-line reason when it did not go (``permanent`` when the
        receiver refused the message itself). Runs under the attempt's deadline; secrets are scrubbed after."""

    def can_deliver(self, channel: Channel, message: Message) -> str | None:
        """Why this channel does not take ``message`` (it is then skipped, never attempted), or None."""

    def refuse_route(self, channel: Channel, route: str) -> str | None:
        """Why the channel may not be in ``route`` (``oncall``, ``consumers`` or a consumer group), or None: the
        rest of the sentence ``<route> names the <kind> channel <name>``, refusing the configuration."""

    def test_messages(self, channel: Channel, message: Message) -> list[tuple[Channel, Message]]:
        """What ``atlasmart notify test`` sends, in order, for the test message ``message``."""


class BaseKind:
    """The optional members of ``ChannelKind``: every message and every route is taken; a test is one message."""

    name: str

    def can_deliver(self, channel: Channel, message: Message) -> str | None:
        return None

    def refuse_route(self, channel: Channel, route: str) -> str | None:
        return None

    def test_messages(self, channel: Channel, message: Message) -> list[tuple[Channel, Message]]:
        return [(channel, message)]


@dataclass
class Entry:
    """One channel's entry in the file, as its kind's ``parse`` reads it.

    Every variable a kind reads a name of (``env_name``) holds a secret: it is
    recorded in ``secrets``, whose values are scrubbed from every recorded reason.
    ``env`` is the environment when the file is read (a value set there may be
    checked, never kept).
    """

    path: Path
    name: str
    spec: Mapping[str, Any]
    env: Mapping[str, str]
    secrets: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"channels.{self.name}"

    def error(self, text: str) -> NotificationConfigError:
        """The refusal of the whole file, ``text`` naming the entry (``f"{entry.where} needs ..."``)."""
        return NotificationConfigError(f"{self.path}: {text}")

    def get(self, key: str, default: Any = None) -> Any:
        return self.spec.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.spec

    def keys(self, *settings: str) -> None:
        """Refuse a setting that is neither common (``kind``, ``timeout_s``) nor one of the kind's ``settings``."""
        check_keys(self.spec, (*COMMON_SETTINGS, *settings), self.path, self.where)

    def no_secret(self, key: str, instead: str) -> None:
        """Refuse a secret written in the file under ``key``; ``instead`` is the setting naming its variable."""
        if key in self.spec:
            raise self.error(f"{self.where} holds a {key}: never put a secret in the file; name the environment "
                             f"variable that holds it ({instead})")

    def env_name(self, key: str) -> str | None:
        """The name of the variable setting ``key`` gives (None when not given); its value is a secret."""
        name = env_name(self.spec.get(key), self.path, f"{self.where}.{key}")
        if name:
            self.secrets.append(name)
        return name

    def number(self, key: str, default: float, low: float, high: float) -> float:
        return number(self.spec.get(key, default), self.path, f"{self.where}.{key}", low, high)

    def url(self, value: Any, where: str) -> str:
        """``value`` if it is an http(s) URL with a host; ``where`` names where it came from (never the URL)."""
        return http_url(value, self.path, where)


# -- checks shared by the kinds and the rest of the file ------------------------------------
def check_mapping(value: Any, path: Path, where: str) -> None:
    if not isinstance(value, dict):
        raise NotificationConfigError(f"{path}: {where} must be a mapping of names to settings, not "
                                      f"{type(value).__name__}")


def check_keys(spec: Mapping[str, Any], allowed: tuple[str, ...], path: Path, where: str) -> None:
    unknown = [str(k) for k in spec if k not in allowed]
    if unknown:
        raise NotificationConfigError(f"{path}: {where} has the unknown setting {unknown[0]!r} (known: "
                                      f"{', '.join(allowed)})")


def number(value: Any, path: Path, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise NotificationConfigError(f"{path}: {where} must be a number from {low:g} to {high:g}, not {value!r}")
    return float(value)


def env_name(value: Any, path: Path, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise NotificationConfigError(f"{path}: {where} is the name of an environment variable (letters, digits, "
                                      f"_), not {value!r}")
    return value


def http_url(value: Any, path: Path, where: str) -> str:
    parts = urlsplit(str(value).strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        shown = f"the scheme {parts.scheme}:" if parts.scheme else "no scheme"
        raise NotificationConfigError(f"{path}: {where} must be an http:// or https:// URL with a host, not one with "
                                      f"{shown}{'' if parts.hostname else ' and no host'}; nothing is sent until "
                                      f"it is fixed")
    return str(value)


def without_credentials(url: str) -> str:
    """A URL as it may be shown: scheme, host and port only (a webhook's path is its token)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}/…"
