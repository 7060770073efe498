"""Sending one message over one channel: Slack-compatible webhooks, PagerDuty Events API v2, email over SMTP.

Each send has the channel's timeout (a few seconds) for connecting and for
every read, so a channel that is down, failing or slow costs one timeout and
raises ``SendFailed`` with a one-line reason, never anything else. A failure
is *permanent* when the receiver refused the message itself (HTTP 400, 413 or
422, an SMTP 5xx on the sender, a recipient or the data): sending it again
cannot help. Every other failure is worth another attempt.

Secrets (a webhook URL held in a variable, the routing key, SMTP credentials)
are read from the environment here, at the moment of sending, and scrubbed
from every reason before it leaves this module.
"""

from __future__ import annotations

import json
import os
import smtplib
import socket
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any

from .channel_config import EMAIL, PAGERDUTY, WEBHOOK, Channel
from .outbox import CONSUMER_NOTICE, TRIGGER, Message

# HTTP statuses that refuse the message itself (malformed, too large, unprocessable).
_PERMANENT_HTTP = (400, 413, 422)
# Slack's limits: a header's text, a section's text, fields per section.
_HEADER_MAX, _SECTION_MAX, _FIELDS_MAX = 150, 3000, 10
_SUBJECT_MAX = 200
_BODY_SHOWN = 200  # characters of a refusing receiver's answer kept in the reason


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
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "***")
    return " ".join(text.split())


def _env(name: str, channel: Channel, what: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise SendFailed(f"${name} is not set: channel {channel.name} reads its {what} from it")
    return value


# -- rendering ---------------------------------------------------------------------------
def _mrkdwn(markdown: str) -> str:
    """Markdown as Slack's mrkdwn: **bold** is *bold*, a heading is a bold line."""
    lines = []
    for line in markdown.splitlines():
        if line.startswith("#"):
            line = f"*{line.lstrip('#').strip()}*"
        lines.append(line.replace("**", "*"))
    return "\n".join(lines)


def _sections(text: str) -> list[dict[str, Any]]:
    """Slack section blocks holding ``text``, split at blank lines so none is longer than Slack allows."""
    blocks, current = [], ""
    for part in _mrkdwn(text).split("\n\n"):
        part = part.strip()
        if not part:
            continue
        while len(part) > _SECTION_MAX:  # one paragraph longer than a section: cut it
            blocks.append(part[:_SECTION_MAX])
            part = part[_SECTION_MAX:]
        if current and len(current) + 2 + len(part) > _SECTION_MAX:
            blocks.append(current)
            current = part
        else:
            current = f"{current}\n\n{part}" if current else part
    if current:
        blocks.append(current)
    return [{"type": "section", "text": {"type": "mrkdwn", "text": b}} for b in blocks]


def slack_payload(message: Message) -> dict[str, Any]:
    """Slack-compatible JSON: ``text`` for the notification line, ``blocks`` for the message."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": message.headline[:_HEADER_MAX]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{message.summary}*"[:_SECTION_MAX]}},
    ]
    if message.facts:
        blocks.append({"type": "section", "fields": [{"type": "mrkdwn", "text": f"*{label}*\n{value}"}
                                                      for label, value in message.facts[:_FIELDS_MAX]]})
    blocks += _sections(message.text)
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"AtlasMart · {message.at}"}]})
    return {"text": f"{message.headline}: {message.summary}", "blocks": blocks}


def pagerduty_payload(message: Message, channel: Channel, routing_key: str) -> dict[str, Any]:
    """A PagerDuty Events API v2 event; the incident id is the dedup key, so resolve closes what trigger opened."""
    event: dict[str, Any] = {"routing_key": routing_key, "event_action": message.pagerduty_action,
                             "dedup_key": message.incident_id or message.key}
    if message.pagerduty_action == TRIGGER:
        event["payload"] = {
            "summary": f"{message.headline}: {message.summary}"[:1024],
            "severity": channel.severity,
            "source": channel.source or f"atlasmart on {socket.gethostname()}",
            "timestamp": message.at,
            "component": "atlasmart",
            "group": "daily sales data product",
            "class": message.kind,
            "custom_details": message.details,
        }
        event["client"] = "AtlasMart"
    return event


def email_message(message: Message, channel: Channel) -> EmailMessage:
    """The mail: to the consumer group's contact for a consumer message, to the channel's ``to`` otherwise."""
    mail = EmailMessage()
    mail["Subject"] = f"[AtlasMart] {message.headline}: {message.summary}"[:_SUBJECT_MAX]
    mail["From"] = channel.sender
    mail["To"] = message.recipient or ", ".join(channel.to)
    mail["Date"] = formatdate(usegmt=True)
    mail["Message-ID"] = make_msgid(domain="atlasmart")
    if message.kind == CONSUMER_NOTICE:  # the notice says its summary and facts itself
        mail.set_content(message.text.rstrip() + "\n")
    else:
        mail["X-AtlasMart-Message"] = message.key  # the dedup key (a consumer's would name their group's asset)
        facts = "\n".join(f"{label}: {value}" for label, value in message.facts)
        mail.set_content(f"{message.summary}\n\n{facts}\n\n{message.text}".rstrip() + "\n")
    return mail


# -- sending ----------------------------------------------------------------------------
def send(channel: Channel, message: Message) -> Sent:
    """Send ``message`` over ``channel``; ``SendFailed`` (reason free of secrets) on any failure."""
    secrets = channel.secret_values() + ([channel.url] if channel.kind == WEBHOOK and channel.url else [])
    try:
        if channel.kind == WEBHOOK:
            url = channel.url or _env(channel.url_env, channel, "URL")
            scheme = url.split(":", 1)[0].lower() if ":" in url else ""
            if scheme not in ("http", "https"):  # set after the configuration was read: never opened
                raise SendFailed(f"${channel.url_env} holds a URL with the scheme {scheme or 'none'}: a webhook URL "
                                 f"is http:// or https://", permanent=True)
            body = slack_payload(message)
            _within(channel, _post_json, url, body, channel.timeout_s)
            return Sent(channel.name, channel.kind, body)
        if channel.kind == PAGERDUTY:
            key = _env(channel.routing_key_env, channel, "routing key")
            body = pagerduty_payload(message, channel, key)
            _within(channel, _post_json, channel.url, body, channel.timeout_s)
            return Sent(channel.name, channel.kind, {**body, "routing_key": f"${channel.routing_key_env}"})
        if channel.kind == EMAIL:
            mail = email_message(message, channel)
            _within(channel, _smtp_send, channel, mail)
            return Sent(channel.name, channel.kind, mail.as_string())
        raise SendFailed(f"unknown channel kind {channel.kind!r}", permanent=True)
    except SendFailed as exc:
        raise SendFailed(scrub(exc.reason, secrets), exc.permanent) from None
    except Exception as exc:  # noqa: BLE001 - a channel's failure is recorded, never raised into the caller
        raise SendFailed(scrub(f"unexpected {type(exc).__name__}: {exc}", secrets)) from None


ATTEMPT_DEADLINE_FACTOR = 2  # a whole attempt may take twice the channel's timeout, however slowly a receiver drips


def _within(channel: Channel, fn: Any, *args: Any) -> None:
    """Run one attempt in a daemon thread; past its wall-clock deadline it is a failed attempt, never SENT."""
    import threading

    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            fn(*args)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            outcome.append(exc)

    worker = threading.Thread(target=run, name=f"atlasmart-send-{channel.name}", daemon=True)
    worker.start()
    deadline = channel.timeout_s * ATTEMPT_DEADLINE_FACTOR
    worker.join(deadline)
    if not outcome:
        raise SendFailed(f"not delivered within {deadline:g} s (the receiver answers too slowly)")
    if outcome[0] is not None:
        raise outcome[0]


def _post_json(url: str, body: dict[str, Any], timeout: float) -> None:
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
        raise SendFailed(_network_reason(exc.reason, timeout)) from None
    except (TimeoutError, socket.timeout, OSError) as exc:
        raise SendFailed(_network_reason(exc, timeout)) from None


_ANSWER_READ = 64 * 1024  # bytes of a receiver's answer read at most


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is a failed delivery (the message would be lost in a body-less GET), never followed."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, D102
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _network_reason(reason: Any, timeout: float) -> str:
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return f"no answer within {timeout:g} s (timed out)"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (nothing listens there)"
    if isinstance(reason, socket.gaierror):
        return f"the host name does not resolve ({reason.strerror})"
    if isinstance(reason, OSError) and reason.strerror:
        return f"{reason.strerror.lower()}"
    return str(reason)


def _smtp_send(channel: Channel, mail: EmailMessage) -> None:
    try:
        with smtplib.SMTP(channel.host, channel.port, timeout=channel.timeout_s) as smtp:
            if channel.starttls:
                smtp.starttls(context=ssl.create_default_context())
            if channel.username_env:
                smtp.login(_env(channel.username_env, channel, "SMTP user"),
                           _env(channel.password_env, channel, "SMTP password"))
            smtp.send_message(mail)
    except SendFailed:
        raise
    except smtplib.SMTPRecipientsRefused as exc:
        codes = sorted({code for code, _ in exc.recipients.values()})
        raise SendFailed(f"SMTP refused the recipient ({', '.join(map(str, codes))})",
                         permanent=all(c >= 500 for c in codes)) from None
    except (smtplib.SMTPSenderRefused, smtplib.SMTPDataError) as exc:
        text = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
        raise SendFailed(f"SMTP {exc.smtp_code}: {text}", permanent=exc.smtp_code >= 500) from None
    except smtplib.SMTPAuthenticationError as exc:
        raise SendFailed(f"SMTP login refused ({exc.smtp_code})") from None
    except smtplib.SMTPNotSupportedError as exc:  # STARTTLS, or AUTH, is not offered
        raise SendFailed(f"the SMTP server does not offer what the channel needs: {exc}") from None
    except smtplib.SMTPException as exc:
        raise SendFailed(f"SMTP: {exc}") from None
    except (TimeoutError, socket.timeout, OSError) as exc:
        raise SendFailed(_network_reason(exc, channel.timeout_s)) from None
