"""Channel kinds: one module each, one object implementing ``ChannelKind``, one line in ``KINDS``.

``KINDS`` is the registry every other module asks (the configuration for a
kind's settings and routes, delivery for what a channel takes, sending for
how): nothing outside this package compares a channel's kind. Adding a kind
(docs/notifications.md, "Adding a channel kind"): a module here whose
``KIND`` implements the protocol (``base.ChannelKind``, with ``BaseKind``'s
defaults), its line below, and its row in the docs' table of kinds. Code that
brings its own kind (a test, a plugin) registers it with ``register``.
"""

from __future__ import annotations

from . import email, pagerduty, webhook
from .base import BaseKind, ChannelKind, ChannelSettings, Entry, NotificationConfigError

KINDS: dict[str, ChannelKind] = {k.name: k for k in (webhook.KIND, pagerduty.KIND, email.KIND)}


def register(kind: ChannelKind) -> ChannelKind:
    """Make ``kind`` a channel kind the configuration may name (``kind: <its name>``); a name is taken once."""
    if not isinstance(kind, ChannelKind):
        raise TypeError(f"{kind!r} does not implement ChannelKind (name, parse, describe, send, can_deliver, "
                        f"refuse_route, test_messages: subclass BaseKind for the last three)")
    if kind.name in KINDS:
        raise ValueError(f"a channel kind {kind.name!r} is registered already")
    KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Forget the kind ``name`` (a test that registered one); a configuration naming it is refused again."""
    KINDS.pop(name, None)


__all__ = ["KINDS", "BaseKind", "ChannelKind", "ChannelSettings", "Entry", "NotificationConfigError", "register",
           "unregister"]
