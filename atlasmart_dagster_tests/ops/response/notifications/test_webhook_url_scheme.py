"""A webhook URL held in a variable is checked when the configuration is read (issue 36 item 6): only http(s).

``file:///etc/hostname`` in ``url_env`` was read locally and recorded SENT with nothing delivered.
"""

from pathlib import Path

import pytest

from atlasmart_dagster.ops.response.notifications import deliver_pending
from atlasmart_dagster.ops.response.notifications.channel_config import CONFIG_FILENAME, NotificationConfigError, parse_config

from .incidents_to_tell import open_incident

HOOK = "channels: {hook: {kind: webhook, url_env: HOOK_URL}}\nroutes: {oncall: [hook]}\n"


@pytest.mark.parametrize("value, scheme", [("file:///etc/hostname", "file:"), ("ftp://h/x", "ftp:"),
                                           ("gopher://h/x", "gopher:"), ("/etc/hostname", "no scheme")])
def test_a_url_env_value_that_is_not_http_is_refused_on_load_naming_channel_variable_and_scheme(
        monkeypatch, value, scheme):
    monkeypatch.setenv("HOOK_URL", value)
    with pytest.raises(NotificationConfigError) as refused:
        parse_config(HOOK, Path("n.yaml"))
    line = str(refused.value)
    assert "\n" not in line and "channels.hook" in line and "$HOOK_URL" in line and scheme in line
    assert "etc/hostname" not in line and "h/x" not in line  # the value is a secret: only its scheme is named


def test_an_unset_url_env_is_still_read_and_fails_when_sending(monkeypatch):
    monkeypatch.delenv("HOOK_URL", raising=False)
    assert parse_config(HOOK, Path("n.yaml")).channels["hook"].settings.url_env == "HOOK_URL"


def test_a_literal_file_url_is_refused_naming_its_scheme():
    with pytest.raises(NotificationConfigError, match=r"channels\.hook\.url .*the scheme file:"):
        parse_config("channels: {hook: {kind: webhook, url: 'file:///etc/hostname'}}\n", Path("n.yaml"))


def test_a_file_url_in_url_env_records_nothing_sent(env, monkeypatch):
    monkeypatch.setenv("HOOK_URL", "file:///etc/hostname")
    (env.home / CONFIG_FILENAME).write_text(HOOK)
    open_incident(env.platform, "2026-09-20")
    report = deliver_pending(env.platform)
    assert report.sent == [] and report.problem.startswith("nothing sent: ") and "$HOOK_URL" in report.problem
    assert env.ledger.notifications.attempts() == []
