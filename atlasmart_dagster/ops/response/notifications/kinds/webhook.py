"""``kind: webhook``: a Slack-compatible incoming webhook, one JSON POST of ``{"text": ..., "blocks": [...]}``.

The URL is ``url_env`` (the variable holding it: a Slack webhook URL is a
credential) or ``url``, http(s) only, checked when the file is read, in the
file and in the variable when it is set; a value set later with another
scheme is refused when sending, never opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..channels import SendFailed, Sent, post_json, secret
from ..message import Message
from .base import BaseKind, ChannelSettings, Entry, without_credentials

# Slack's limits: a header's text, a section's text, fields per section.
_HEADER_MAX, _SECTION_MAX, _FIELDS_MAX = 150, 3000, 10


@dataclass(frozen=True)
class WebhookSettings(ChannelSettings):
    url: str | None = None  # written in the file (then itself a secret)
    url_env: str | None = None  # the variable holding the URL

    def written_secrets(self) -> tuple[str, ...]:
        return (self.url,) if self.url else ()


class Webhook(BaseKind):
    name = "webhook"

    def parse(self, entry: Entry) -> WebhookSettings:
        entry.keys("url", "url_env")
        url, url_env = entry.get("url"), entry.env_name("url_env")
        if bool(url) == bool(url_env):
            raise entry.error(f"{entry.where} needs its URL: url_env (the environment variable that holds it; a "
                              f"Slack webhook URL is a secret) or url, not both")
        if url_env and entry.env.get(url_env):  # the value is a secret: only its scheme may be named
            entry.url(entry.env[url_env], f"{entry.where}.url_env: ${url_env}")
        return WebhookSettings(url=entry.url(url, f"{entry.where}.url") if url else None, url_env=url_env)

    def describe(self, settings: WebhookSettings) -> str:
        return f"${settings.url_env}" if settings.url_env else without_credentials(settings.url or "")

    def send(self, channel, message: Message) -> Sent:
        settings: WebhookSettings = channel.settings
        url = settings.url or secret(settings.url_env, channel, "URL")
        scheme = url.split(":", 1)[0].lower() if ":" in url else ""
        if scheme not in ("http", "https"):  # set after the configuration was read: never opened
            raise SendFailed(f"${settings.url_env} holds a URL with the scheme {scheme or 'none'}: a webhook URL "
                             f"is http:// or https://", permanent=True)
        body = slack_payload(message)
        post_json(url, body, channel.timeout_s)
        return Sent(channel.name, channel.kind, body)


KIND = Webhook()


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
