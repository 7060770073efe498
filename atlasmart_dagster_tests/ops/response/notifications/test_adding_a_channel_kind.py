"""Adding a channel kind, followed once as docs/notifications.md ("Adding a channel kind") says.

The kind is ``recorder``, defined here as a kind's module would define it:
it POSTs each message's key, kind and headline, with a token read from the
environment, to a local receiver. It is registered through the public hook
(``kinds.register``), named in the home's notifications.yaml, and delivers a
real incident message that the ledger records SENT. Nothing in channel_config,
delivery or channels knows it: they ask the registry, and the last test holds
that no other module compares a channel's kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from atlasmart_dagster.ops.response import notifications
from atlasmart_dagster.ops.response.notifications import deliver_pending
from atlasmart_dagster.ops.response.notifications.channel_config import CONFIG_FILENAME, NotificationConfigError, load_config
from atlasmart_dagster.ops.response.notifications.channels import Sent, post_json, secret
from atlasmart_dagster.ops.response.notifications.kinds import KINDS, BaseKind, ChannelSettings, Entry, register, unregister
from atlasmart_dagster.ops.response.notifications.kinds.base import without_credentials
from atlasmart_dagster.ops.response.notifications.message import Message
from atlasmart_dagster.store.ledger.notification_deliveries import GAVE_UP, SENT

from .incidents_to_tell import open_incident
from .receivers import HttpReceiver

DAY = "2026-09-20"
TOKEN = "rec-t0ken-s3cret"
DOCS = Path(__file__).resolve().parents[4] / "docs" / "notifications.md"


# -- step 1: the kind's module: its settings, and one object implementing ChannelKind ----------
@dataclass(frozen=True)
class RecorderSettings(ChannelSettings):
    url: str
    token_env: str


class Recorder(BaseKind):
    """Takes every message on every route (BaseKind's defaults); a test is the test message itself."""

    name = "recorder"

    def parse(self, entry: Entry) -> RecorderSettings:
        entry.keys("url", "token_env", "token")
        entry.no_secret("token", "token_env")
        token_env = entry.env_name("token_env")  # read by name: its value is scrubbed from every reason
        if not entry.get("url") or token_env is None:
            raise entry.error(f"{entry.where} needs url and token_env")
        return RecorderSettings(url=entry.url(entry.get("url"), f"{entry.where}.url"), token_env=token_env)

    def describe(self, settings: RecorderSettings) -> str:
        return f"{without_credentials(settings.url)} (token ${settings.token_env})"

    def send(self, channel, message: Message) -> Sent:
        settings: RecorderSettings = channel.settings
        body = {"key": message.key, "kind": message.kind, "headline": message.headline,
                "token": secret(settings.token_env, channel, "token")}
        post_json(settings.url, body, channel.timeout_s)
        return Sent(channel.name, channel.kind, {**body, "token": f"${settings.token_env}"})


KIND = Recorder()


@pytest.fixture
def recorder_kind():
    """Step 2, the registry line: a kind of the package is a line in kinds.KINDS; one brought along registers."""
    register(KIND)
    yield KIND
    unregister(KIND.name)


def recorder_file(env, url: str) -> None:
    (env.home / CONFIG_FILENAME).write_text(
        f"channels:\n  rec: {{kind: recorder, url: '{url}', token_env: RECORDER_TOKEN, timeout_s: 2}}\n"
        f"routes:\n  oncall: [rec]\ndelivery: {{max_attempts: 1}}\n")


# -- step 4: the test ----------------------------------------------------------------------------
def test_a_registered_kind_named_in_the_file_delivers_an_incident_and_the_ledger_records_it_sent(
        env, http, recorder_kind, monkeypatch):
    monkeypatch.setenv("RECORDER_TOKEN", TOKEN)
    recorder_file(env, http.url("/rec"))
    config = load_config(env.platform.home)
    assert config.channels["rec"].describe()["to"] == f"http://127.0.0.1:{http.server.server_port}/… " \
                                                      f"(token $RECORDER_TOKEN)"
    assert config.channels["rec"].secret_names() == ("RECORDER_TOKEN",)
    incident = open_incident(env.platform, DAY)

    report = deliver_pending(env.platform)  # the deployment's file, as the sensor reads it
    assert report.problem is None
    assert [(s["key"], s["channel"], s["kind"]) for s in report.sent] == [(f"{incident.id}:e1", "rec",
                                                                           "incident_opened")]
    (body,) = http.bodies("/rec")
    assert body == {"key": f"{incident.id}:e1", "kind": "incident_opened", "headline": f"{incident.id} opened",
                    "token": TOKEN}
    (row,) = env.ledger.notifications.attempts()
    assert (row["message_key"], row["channel"], row["outcome"], row["attempt"]) == (f"{incident.id}:e1", "rec",
                                                                                    SENT, 1)
    assert deliver_pending(env.platform).sent == [] and len(http.bodies()) == 1  # sent: never again


def test_the_new_kind_gets_the_shared_rules_without_writing_them(env, recorder_kind, monkeypatch):
    """The file is checked (unknown settings, secrets in it), and a failure's reason is scrubbed of the token."""
    monkeypatch.setenv("RECORDER_TOKEN", TOKEN)
    refusing = HttpReceiver(status=400, echo=True)  # quotes what it refused, the token with it
    try:
        recorder_file(env, refusing.url("/rec"))
        open_incident(env.platform, DAY)
        (gave_up,) = deliver_pending(env.platform).gave_up  # 400: the message itself is refused
        assert gave_up["error"].startswith("HTTP 400 Bad Request: refused: ") and "***" in gave_up["error"]
        assert TOKEN not in str(env.ledger.notifications.attempts())
        assert [r["outcome"] for r in env.ledger.notifications.attempts()] == [GAVE_UP]
    finally:
        refusing.close()
    for line, message in [("{kind: recorder, url: 'http://h/x', token_env: T, tokn: x}", "unknown setting 'tokn'"),
                          ("{kind: recorder, url: 'http://h/x', token: x}", "holds a token: never put a secret"),
                          ("{kind: recorder, url: 'file:///x', token_env: T}", r"rec\.url must be an http:// or")]:
        (env.home / CONFIG_FILENAME).write_text(f"channels:\n  rec: {line}\n")
        with pytest.raises(NotificationConfigError, match=message):
            load_config(env.platform.home)


def test_a_kind_is_named_only_once_registered(env):
    (env.home / CONFIG_FILENAME).write_text("channels:\n  rec: {kind: recorder, url: 'http://h/x', token_env: T}\n")
    with pytest.raises(NotificationConfigError, match="kind 'recorder'; a channel's kind is one of webhook, "
                                                      "pagerduty, email$"):
        load_config(env.platform.home)
    register(KIND)
    try:
        assert list(KINDS) == ["webhook", "pagerduty", "email", "recorder"]
        assert load_config(env.platform.home).channels["rec"].kind == "recorder"
        with pytest.raises(ValueError, match="registered already"):
            register(Recorder())
    finally:
        unregister(KIND.name)
    assert "recorder" not in KINDS


def test_the_docs_section_names_what_this_test_did():
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## Adding a channel kind", 1)[1].split("\n## ", 1)[0]
    for step in ("kinds/", "ChannelKind", "BaseKind", "KINDS", "register", "test_adding_a_channel_kind.py",
                 "| channel kind | settings |"):
        assert step in section or step in text, step
    assert len(section.splitlines()) < 40  # a short section


# -- no kind is compared outside its module ---------------------------------------------------
PACKAGE = Path(notifications.__file__).parent
KIND_COMPARED = re.compile(r"\bkind\s*(==|!=)|(==|!=)\s*[\w.]*\bkind\b")
KIND_NAMED = re.compile(r"""["'](webhook|pagerduty|email)["']""")


def outside_kinds(package: Path) -> list[Path]:
    return sorted(p for p in package.rglob("*.py") if "kinds" not in p.relative_to(package).parts)


def test_no_module_outside_kinds_compares_or_names_a_channel_kind():
    scanned = outside_kinds(PACKAGE)
    names = {p.name for p in scanned}
    assert {"channel_config.py", "channels.py", "delivery.py", "outbox.py"} <= names  # never an empty scan
    found = [f"{p.relative_to(PACKAGE)}:{n}: {line.strip()}" for p in scanned
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if KIND_COMPARED.search(line) or KIND_NAMED.search(line)]
    assert found == []
    # the pattern finds what it is for: the if-chains this replaced
    assert KIND_COMPARED.search("if channel.kind == PAGERDUTY and message.pagerduty_action is None:")
    assert KIND_COMPARED.search("if kind == WEBHOOK:") and KIND_NAMED.search('WEBHOOK = "webhook"')
    assert not KIND_COMPARED.search('if event["kind"] == "opened":')  # an incident event's kind, not a channel's
