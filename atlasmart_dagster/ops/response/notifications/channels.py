"""Sending one message over one channel, whatever its kind, and the HTTP post the kinds share.

``send`` hands the message to the channel's kind (kinds/) and holds every
kind to the same rules: an attempt has a wall-clock deadline (twice the
channel's timeout, however slowly a receiver drips), any failure is
``SendFailed`` with a one-line reason, never anything else, and every secret
the channel names (a webhook URL held in a variable, the routing key, SMTP
credentials) is scrubbed from that reason before it leaves this module. A
failure is *permanent* when the receiver refused the message itself (HTTP 400,
413 or 422, an SMTP 5xx on the sender, a recipient or the data): sending it
again cannot help. Every other failure is worth another attempt.

Secrets are read from the environment by the kinds (``secret``), at the moment
of sending, never when the configuration is read.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .channel_config import Channel
    from .message import Message

# HTTP statuses that refuse the message itself (malformed, too large, unprocessable).
_PERMANENT_HTTP = (400, 413, 422)
_BODY_SHOWN = 200  # characters of a refusing receiver's answer kept in the reason
_ANSWER_READ = 64 * 1024  # bytes of a receiver's answer read at most
ATTEMPT_DEADLINE_FACTOR = 2  # a whole attempt may take twice the channel's timeout, however slowly a receiver drips


class SendFailed(Exception):
    """A send that did not succeed: why, in one line free of secrets, and whether another attempt can help."""

    def __init__(self, reason: str, permanent: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


@dataclass(frozen=True)
class Sent:
    """What a receiver was given: the JSON body (webhook, PagerDuty) or the mail, secrets masked."""

    channel: str
    kind: str
    body: Any


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every secret value replaced (a reason must never carry one into the ledger or a log)."""
    for value in sorted(secrets, key=len, reverse=True):
        if value:
            text = text.replace(value, "***")
    return " ".join(text.split())


def secret(name: str, channel: Channel, what: str) -> str:
    """The value of the variable ``name`` now; unset, a failed attempt naming it (retried like any other)."""
    value = os.environ.get(name)
    if not value:
        raise SendFailed(f"${name} is not set: channel {channel.name} reads its {what} from it")
    return value


# -- sending ----------------------------------------------------------------------------
def send(channel: Channel, message: Message) -> Sent:
    """Send ``message`` over ``channel`` by its kind; ``SendFailed`` (reason free of secrets) on any failure."""
    secrets = channel.secret_values()
    try:
        return within(channel, channel.impl.send, channel, message)
    except SendFailed as exc:
        raise SendFailed(scrub(exc.reason, secrets), exc.permanent) from None
    except Exception as exc:  # noqa: BLE001 - a channel's failure is recorded, never raised into the caller
        raise SendFailed(scrub(f"unexpected {type(exc).__name__}: {exc}", secrets)) from None


def within(channel: Channel, fn: Callable[..., Any], *args: Any) -> Any:
    """Run one attempt in a daemon thread; past its wall-clock deadline it is a failed attempt, never SENT."""
    outcome: list[tuple[Any, BaseException | None]] = []

    def run() -> None:
        try:
            outcome.append((fn(*args), None))
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            outcome.append((None, exc))

    worker = threading.Thread(target=run, name=f"atlasmart-send-{channel.name}", daemon=True)
    worker.start()
    deadline = channel.timeout_s * ATTEMPT_DEADLINE_FACTOR
    worker.join(deadline)
    if not outcome:
        raise SendFailed(f"not delivered within {deadline:g} s (the receiver answers too slowly)")
    result, error = outcome[0]
    if error is not None:
        raise error
    return result


# -- HTTP: one JSON POST, as webhooks and PagerDuty take it ------------------------------------
def post_json(url: str, body: dict[str, Any], timeout: float) -> None:
    """POST ``body``; a 2xx is delivered. Its answer is read only up to 64 KiB, and a redirect (3xx) fails."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "atlasmart"})
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            response.read(_ANSWER_READ)  # a bounded prefix: a huge answer costs neither memory nor time
    except urllib.error.HTTPError as exc:
        answer = exc.read()[:_BODY_SHOWN].decode("utf-8", "replace").strip()
        reason = f"HTTP {exc.code} {exc.reason}" + (f": {answer}" if answer else "")
        raise SendFailed(reason, permanent=exc.code in _PERMANENT_HTTP) from None
    except urllib.error.URLError as exc:
        raise SendFailed(network_reason(exc.reason, timeout)) from None
    except (TimeoutError, socket.timeout, OSError) as exc:
        raise SendFailed(network_reason(exc, timeout)) from None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is a failed delivery (the message would be lost in a body-less GET), never followed."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, D102
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def network_reason(reason: Any, timeout: float) -> str:
    """A network failure in a few words: timed out, refused, a name that does not resolve."""
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return f"no answer within {timeout:g} s (timed out)"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (nothing listens there)"
    if isinstance(reason, socket.gaierror):
        return f"the host name does not resolve ({reason.strerror})"
    if isinstance(reason, OSError) and reason.strerror:
        return f"{reason.strerror.lower()}"
    return str(reason)
