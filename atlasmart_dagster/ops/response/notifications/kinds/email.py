"""``kind: email``: mail over SMTP, with STARTTLS and a login whose credentials come from the environment.

An on-call email channel mails its ``to`` (required in ``routes.oncall``); in
a consumer route it mails each group's contact (the message's recipient). An
on-call mail carries its key as ``X-AtlasMart-Message`` for receivers that
drop repeats.
"""

from __future__ import annotations

import smtplib
import socket
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from ..channels import SendFailed, Sent, network_reason, secret
from ..message import CONSUMER_NOTICE, ONCALL, Message
from .base import ADDRESS, BaseKind, ChannelSettings, Entry

_SUBJECT_MAX = 200


@dataclass(frozen=True)
class EmailSettings(ChannelSettings):
    host: str
    sender: str
    port: int = 25
    to: tuple[str, ...] = ()  # the on-call route's recipients (a consumer group's contact otherwise)
    starttls: bool = False
    username_env: str | None = None
    password_env: str | None = None


class Email(BaseKind):
    name = "email"

    def parse(self, entry: Entry) -> EmailSettings:
        where = entry.where
        entry.keys("host", "port", "from", "to", "starttls", "username_env", "password_env", "password")
        entry.no_secret("password", "password_env")
        for required in ("host", "from"):
            if not entry.get(required):
                raise entry.error(f"{where} needs {required} (an email channel needs host, port and from; to for "
                                  f"the on-call route)")
        sender = str(entry.get("from"))
        to = entry.get("to") or []
        to = [to] if isinstance(to, str) else to
        if not isinstance(to, list) or not all(isinstance(a, str) and ADDRESS.fullmatch(a) for a in [sender, *to]):
            raise entry.error(f"{where}: from and to must be email addresses (to: one or a list)")
        username_env, password_env = entry.env_name("username_env"), entry.env_name("password_env")
        if bool(username_env) != bool(password_env):
            raise entry.error(f"{where} needs both username_env and password_env, or neither")
        starttls = entry.get("starttls", False)
        if not isinstance(starttls, bool):
            raise entry.error(f"{where}.starttls is true or false, not {starttls!r}")
        port = int(entry.number("port", 25, low=1, high=65535))
        return EmailSettings(host=str(entry.get("host")), sender=sender, port=port, to=tuple(to), starttls=starttls,
                             username_env=username_env, password_env=password_env)

    def describe(self, settings: EmailSettings) -> str:
        return f"{settings.host}:{settings.port}{' STARTTLS' if settings.starttls else ''} from {settings.sender}"

    def refuse_route(self, channel, route: str) -> str | None:
        if route == ONCALL and not channel.settings.to:
            return ", which has no to: give it the on-call addresses (consumer routes mail each group's contact)"
        return None

    def can_deliver(self, channel, message: Message) -> str | None:
        if not (message.recipient or channel.settings.to):
            return "has no to: address and the message no recipient"
        return None

    def send(self, channel, message: Message) -> Sent:
        mail = email_message(message, channel.settings)
        smtp_send(channel, mail)
        return Sent(channel.name, channel.kind, mail.as_string())


def email_message(message: Message, settings: EmailSettings) -> EmailMessage:
    """The mail: to the consumer group's contact for a consumer message, to the channel's ``to`` otherwise."""
    mail = EmailMessage()
    mail["Subject"] = f"[AtlasMart] {message.headline}: {message.summary}"[:_SUBJECT_MAX]
    mail["From"] = settings.sender
    mail["To"] = message.recipient or ", ".join(settings.to)
    mail["Date"] = formatdate(usegmt=True)
    mail["Message-ID"] = make_msgid(domain="atlasmart")
    if message.kind == CONSUMER_NOTICE:  # the notice says its summary and facts itself
        mail.set_content(message.text.rstrip() + "\n")
    else:
        mail["X-AtlasMart-Message"] = message.key  # the dedup key (a consumer's would name their group's asset)
        facts = "\n".join(f"{label}: {value}" for label, value in message.facts)
        mail.set_content(f"{message.summary}\n\n{facts}\n\n{message.text}".rstrip() + "\n")
    return mail


def smtp_send(channel, mail: EmailMessage) -> None:
    settings: EmailSettings = channel.settings
    try:
        with smtplib.SMTP(settings.host, settings.port, timeout=channel.timeout_s) as smtp:
            if settings.starttls:
                smtp.starttls(context=ssl.create_default_context())
            if settings.username_env:
                smtp.login(secret(settings.username_env, channel, "SMTP user"),
                           secret(settings.password_env, channel, "SMTP password"))
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
        raise SendFailed(network_reason(exc, channel.timeout_s)) from None


KIND = Email()
