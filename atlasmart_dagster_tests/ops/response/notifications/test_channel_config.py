"""The channels and routes are configuration, refused as a whole with one line naming what is wrong."""

from pathlib import Path

import pytest

from atlasmart_dagster.ops.response.notifications.channel_config import (
    NOTIFICATIONS_ENV,
    NotificationConfigError,
    config_path,
    load_config,
    parse_config,
)
from atlasmart_dagster.ops.response.notifications.kinds.pagerduty import EVENTS_URL
from atlasmart_dagster.ops.response.notifications.outbox import consumer_groups, package_asset_graph
from atlasmart_dagster.store.home import AtlasmartHome

VALID = """
channels:
  oncall-slack: {kind: webhook, url_env: ONCALL_SLACK_WEBHOOK_URL}
  oncall-pager: {kind: pagerduty, routing_key_env: PAGERDUTY_ROUTING_KEY}
  mail:
    kind: email
    host: smtp.example.com
    port: 587
    from: atlasmart@example.com
    to: oncall@example.com
    starttls: true
    username_env: SMTP_USER
    password_env: SMTP_PASSWORD
routes:
  oncall: [oncall-slack, oncall-pager, mail]
  consumers: [mail]
delivery: {max_attempts: 4, backoff_s: 30}
"""


def test_a_valid_configuration_is_read_with_its_defaults():
    config = parse_config(VALID, Path("n.yaml"))
    assert [c.name for c in config.channels_of("oncall")] == ["oncall-slack", "oncall-pager", "mail"]
    assert [c.name for c in config.channels_of("consumer_group_finance")] == ["mail"]
    pager = config.channels["oncall-pager"]
    assert pager.settings.url == EVENTS_URL and pager.settings.severity == "error" and pager.timeout_s == 5
    mail = config.channels["mail"]
    assert mail.settings.to == ("oncall@example.com",) and mail.settings.starttls and mail.settings.port == 587
    assert mail.secret_names() == ("SMTP_USER", "SMTP_PASSWORD")
    assert config.delivery.max_attempts == 4 and [config.delivery.backoff(n) for n in (1, 2, 3)] == [30, 60, 120]


@pytest.mark.parametrize("text, message", [
    ("channels: {a: {kind: sms}}", r"channels\.a has kind 'sms'; a channel's kind is one of webhook, pagerduty, email"),
    ("channels: {a: {kind: webhook}}", r"channels\.a needs its URL: url_env"),
    ("channels: {a: {kind: webhook, url: 'ftp://x'}}", r"channels\.a\.url must be an http:// or https:// URL"),
    ("channels: {a: {kind: webhook, url: 'https://x/y', url_env: X}}", r"url_env .* or url, not both"),
    ("channels: {a: {kind: pagerduty}}", r"channels\.a needs routing_key_env"),
    ("channels: {a: {kind: pagerduty, routing_key: R0UT1NG}}", r"holds a routing_key: never put a secret in the file"),
    ("channels: {a: {kind: pagerduty, routing_key_env: K, severity: loud}}", r"severity is 'loud'"),
    ("channels: {a: {kind: email, host: h}}", r"channels\.a needs from"),
    ("channels: {a: {kind: email, host: h, from: f@x.org, password: pw}}", r"holds a password: never put a secret"),
    ("channels: {a: {kind: email, host: h, from: f@x.org, username_env: U}}", r"both username_env and password_env"),
    ("channels: {a: {kind: email, host: h, from: nobody}}", r"from and to must be email addresses"),
    ("channels: {a: {kind: webhook, url_env: 'NOT A NAME'}}", r"url_env is the name of an environment variable"),
    ("channels: {a: {kind: webhook, url_env: X, timeout_s: 600}}", r"timeout_s must be a number from 0.1 to 60"),
    ("channels: {a: {kind: webhook, url_env: X, tiemout_s: 5}}", r"unknown setting 'tiemout_s'"),
    ("channels: {a: {kind: webhook, url_env: X}}\nroutes: {oncall: [b]}",
     r"routes\.oncall names the channel 'b', which channels does not declare \(declared: a\)"),
    ("channels: {p: {kind: pagerduty, routing_key_env: K}}\nroutes: {consumers: [p]}",
     r"pagerduty channel p: PagerDuty pages on-call"),
    ("channels: {m: {kind: email, host: h, from: f@x.org}}\nroutes: {oncall: [m]}",
     r"email channel m, which has no to"),
    ("routes: {everyone: []}", r"routes has the unknown setting 'everyone'"),
    ("delivery: {max_attempts: 0}", r"delivery\.max_attempts must be a number from 1"),
    ("channels: [a, b]", r"channels must be a mapping"),
    ("channels: {a: [", r"is not valid YAML"),
])
def test_a_wrong_configuration_is_refused_with_what_is_wrong(text, message):
    with pytest.raises(NotificationConfigError, match=message):
        parse_config(text, Path("notifications.yaml"))


def test_no_file_means_no_channels_and_the_variable_chooses_the_file(tmp_path, monkeypatch):
    home = AtlasmartHome(tmp_path / "home")
    monkeypatch.delenv(NOTIFICATIONS_ENV, raising=False)
    assert config_path(home) == tmp_path / "home" / "notifications.yaml"
    assert load_config(home) is None
    shared = tmp_path / "team" / "notifications.yaml"
    monkeypatch.setenv(NOTIFICATIONS_ENV, str(shared))
    with pytest.raises(NotificationConfigError, match="names .* which is not a file"):
        load_config(home)
    shared.parent.mkdir()
    shared.write_text(VALID)
    assert load_config(home).path == shared


def test_a_route_naming_a_consumer_group_the_graph_does_not_have_is_refused():
    text = VALID.replace("  consumers: [mail]\n",
                         "  consumers: [mail]\n  consumer_groups: {consumer_group_marketing: [mail]}\n")
    config = parse_config(text, Path("n.yaml"))
    known = {g.name for g in consumer_groups(package_asset_graph())}
    assert known == {"consumer_group_finance", "consumer_group_executives"}
    with pytest.raises(NotificationConfigError, match="consumer_group_marketing, which the code location does not "
                                                      "have: the consumer groups are consumer_group_executives, "
                                                      "consumer_group_finance"):
        config.check_groups(known)
