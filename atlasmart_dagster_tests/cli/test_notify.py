"""`atlasmart notify test|status|deliver` against real receivers, with the channels in the home's notifications.yaml."""

import json
import re

import pytest

from atlasmart_dagster.cli import main as cli
from atlasmart_dagster.ops.response.notifications.channel_config import CONFIG_FILENAME
from atlasmart_dagster_tests.ops.response.notifications.incidents_to_tell import open_incident
from atlasmart_dagster_tests.ops.response.notifications.receivers import HttpReceiver, SmtpReceiver, free_port

ROUTING_KEY = "R0UTING-KEY-cli"


@pytest.fixture(autouse=True)
def notify_command(monkeypatch):
    """The command's line in COMMANDS (see atlasmart_dagster/cli/main.py), as the command table lists it."""
    from atlasmart_dagster.cli.notify import cmd_notify

    monkeypatch.setitem(cli.COMMANDS, "notify", ("notify", cmd_notify.__doc__))


@pytest.fixture
def receivers(env, monkeypatch):
    http, smtp = HttpReceiver(), SmtpReceiver()
    monkeypatch.setenv("PAGERDUTY_ROUTING_KEY", ROUTING_KEY)
    (env.home / CONFIG_FILENAME).write_text(f"""\
channels:
  oncall-slack: {{kind: webhook, url: '{http.url("/slack")}'}}
  oncall-pager: {{kind: pagerduty, url: '{http.url("/v2/enqueue")}', routing_key_env: PAGERDUTY_ROUTING_KEY}}
  oncall-mail: {{kind: email, host: 127.0.0.1, port: {smtp.port}, from: atlasmart@atlasmart.example,
                to: oncall@atlasmart.example}}
  down: {{kind: webhook, url: 'http://127.0.0.1:{free_port()}/hook', timeout_s: 1}}
routes:
  oncall: [oncall-slack, oncall-pager, down]
delivery: {{backoff_s: 0, max_attempts: 2}}
""")
    yield http, smtp
    http.close()
    smtp.close()


def notify(env, capsys, *args) -> tuple[int, str, str]:
    code = cli.main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", "notify", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_test_message_goes_over_each_kind_of_channel_as_it_is_printed(env, capsys, receivers):
    http, smtp = receivers
    code, out, _ = notify(env, capsys, "test", "oncall-slack", "--json")
    assert code == 0
    (slack,) = http.bodies("/slack")
    assert json.loads(out) == {"channel": "oncall-slack", "kind": "webhook", "sent": [slack]}
    assert slack["blocks"][0]["text"]["text"] == "AtlasMart test message"

    code, out, _ = notify(env, capsys, "test", "oncall-pager", "--json")
    assert code == 0
    trigger, resolve = http.bodies("/v2/enqueue")
    assert (trigger["event_action"], resolve["event_action"]) == ("trigger", "resolve")
    assert trigger["dedup_key"] == resolve["dedup_key"] and trigger["payload"]["severity"] == "info"
    assert trigger["routing_key"] == ROUTING_KEY  # sent to PagerDuty, never printed:
    assert ROUTING_KEY not in out and json.loads(out)["sent"][0]["routing_key"] == "$PAGERDUTY_ROUTING_KEY"

    code, out, _ = notify(env, capsys, "test", "oncall-mail", "--to", "someone@atlasmart.example")
    assert code == 0 and out.startswith("sent a test message over oncall-mail (email, 127.0.0.1:")
    ((rcpt, mail),) = smtp.mails
    assert rcpt == ["someone@atlasmart.example"] and mail["Subject"].startswith("[AtlasMart] AtlasMart test message")
    assert env.ledger.notifications.attempts() == []  # a test is not a notification of anything


def test_a_test_message_a_channel_does_not_take_exits_1_with_why(env, capsys, receivers):
    code, out, err = notify(env, capsys, "test", "down")
    assert code == 1 and out == ""
    assert err == ("atlasmart: error: the test message over down was not sent: connection refused (nothing listens "
                   "there)\n")


@pytest.mark.parametrize("args, config, message", [
    (["test", "nowhere"], None, "no channel 'nowhere' in .*notifications.yaml \\(channels: oncall-slack"),
    (["test"], None, "notify test needs the channel to test"),
    (["test", "oncall-slack"], "channels: {a: {kind: telegraph}}\n", "channels.a has kind 'telegraph'"),
    (["deliver"], "", "no notification channels: write .*notifications.yaml or set \\$ATLASMART_NOTIFICATIONS"),
    (["status", "--outcome", "lost"], None, "--outcome is one of sent, failed, gave_up, not 'lost'"),
])
def test_a_wrong_channel_or_configuration_exits_2_and_sends_nothing(env, capsys, receivers, args, config, message):
    http, _ = receivers
    if config is not None:
        path = env.home / CONFIG_FILENAME
        path.write_text(config) if config else path.unlink()
    code, _, err = notify(env, capsys, *args)
    assert code == 2 and http.bodies() == []
    assert err.startswith("atlasmart: error: ")
    assert re.search(message, err), err


def test_deliver_sends_what_is_due_and_status_lists_each_delivery(env, capsys, receivers):
    http, _ = receivers
    incident = open_incident(env.platform, "2026-09-20")
    code, out, _ = notify(env, capsys, "deliver", "--json")
    report = json.loads(out)
    assert code == 1  # the down channel failed (recorded, retried by the next call)
    assert sorted(s["channel"] for s in report["sent"]) == ["oncall-pager", "oncall-slack"]
    assert [(f["channel"], f["attempt"]) for f in report["failed"]] == [("down", 1)]

    code, out, _ = notify(env, capsys, "status", "--json")
    status = json.loads(out)
    assert code == 0 and status["config"] == str(env.home / CONFIG_FILENAME)
    assert {c["channel"]: c["to"] for c in status["channels"]}["oncall-pager"].endswith(
        "(routing key $PAGERDUTY_ROUTING_KEY)")
    assert {(d["message_key"], d["channel"], d["outcome"]) for d in status["deliveries"]} == {
        (f"{incident.id}:e1", "oncall-slack", "SENT"), (f"{incident.id}:e1", "oncall-pager", "SENT"),
        (f"{incident.id}:e1", "down", "FAILED")}

    code, out, _ = notify(env, capsys, "deliver")
    assert code == 1 and out.startswith("notifications: 0 sent, 0 failed (retried later), 1 gave up")
    code, out, _ = notify(env, capsys, "status", "--outcome", "gave_up")
    assert code == 0
    (row,) = [line for line in out.splitlines() if line.startswith(incident.id)]
    assert row.split()[:4] == [f"{incident.id}:e1", "down", "gave_up", "2"] and "connection refused" in row
    assert len(http.bodies("/slack")) == 1 and len(http.bodies("/v2/enqueue")) == 1  # sent once
