"""A channel that is down, failing or slow is recorded, retried on the next call and given up; it never raises,
never holds back the other channels, and never writes a secret to the ledger or a log."""

import logging
import time

import pytest

from atlasmart_dagster.ops.response.notifications import deliver_pending
from atlasmart_dagster.ops.response.notifications.channel_config import CONFIG_FILENAME
from atlasmart_dagster.store.ledger.notification_deliveries import FAILED, GAVE_UP, SENT

from .incidents_to_tell import config, open_incident, resolve
from .receivers import HttpReceiver, free_port

DAY = "2026-09-20"
TIMEOUT_S = 0.5


@pytest.fixture(params=["refused", "http_500", "slow"])
def failing(request):
    """(URL of a channel that fails, the reason its attempts record)."""
    if request.param == "refused":
        yield f"http://127.0.0.1:{free_port()}/hook", "connection refused (nothing listens there)"
        return
    receiver = HttpReceiver(status=500) if request.param == "http_500" else HttpReceiver(delay=3 * TIMEOUT_S)
    yield receiver.url(), ("HTTP 500 Internal Server Error: internal error" if request.param == "http_500"
                           else f"no answer within {TIMEOUT_S:g} s (timed out)")
    receiver.close()


def test_a_failing_channel_is_retried_on_each_call_then_given_up_while_the_others_deliver(env, http, failing):
    url, reason = failing
    channels = config(f"  broken: {{kind: webhook, url: '{url}', timeout_s: {TIMEOUT_S}}}\n"
                      f"  working: {{kind: webhook, url: '{http.url()}'}}", "[broken, working]",
                      delivery="{max_attempts: 3, backoff_s: 0}")
    incident = open_incident(env.platform, DAY)
    key = f"{incident.id}:e1"
    first = deliver_pending(env.platform, config=channels)
    assert [(f["channel"], f["attempt"], f["error"]) for f in first.failed] == [("broken", 1, reason)]
    assert [s["channel"] for s in first.sent] == ["working"] and len(http.bodies()) == 1
    assert [f["attempt"] for f in deliver_pending(env.platform, config=channels).failed] == [2]
    (gave_up,) = deliver_pending(env.platform, config=channels).gave_up
    assert (gave_up["attempt"], gave_up["error"]) == (3, reason)
    assert deliver_pending(env.platform, config=channels).to_json()["gave_up"] == []
    attempts = [(r["channel"], r["outcome"], r["attempt"], r["error"]) for r in env.ledger.notifications.attempts()]
    assert attempts == [("broken", FAILED, 1, reason), ("working", SENT, 1, None), ("broken", FAILED, 2, reason),
                        ("broken", GAVE_UP, 3, reason)]
    assert all(r["message_key"] == key for r in env.ledger.notifications.attempts())
    assert len(http.bodies()) == 1  # the working channel was sent the message once


def test_a_channel_that_comes_back_gets_the_message_on_the_next_attempt(env):
    receiver = HttpReceiver(status=500)
    try:
        channels = config(f"  slack: {{kind: webhook, url: '{receiver.url()}'}}", "[slack]",
                          delivery="{backoff_s: 0}")
        open_incident(env.platform, DAY)
        assert deliver_pending(env.platform, config=channels).failed
        receiver.status = 200
        (sent,) = deliver_pending(env.platform, config=channels).sent
        assert sent["attempt"] == 2
        assert [r["outcome"] for r in env.ledger.notifications.attempts()] == [FAILED, SENT]
    finally:
        receiver.close()


def test_a_receiver_refusing_the_message_itself_is_given_up_at_once(env):
    refusing = HttpReceiver(status=400)  # Slack's "invalid_payload": sending it again cannot help
    try:
        channels = config(f"  slack: {{kind: webhook, url: '{refusing.url()}'}}", "[slack]",
                          delivery="{max_attempts: 5, backoff_s: 0}")
        open_incident(env.platform, DAY)
        (gave_up,) = deliver_pending(env.platform, config=channels).gave_up
        assert (gave_up["attempt"], gave_up["error"]) == (1, "HTTP 400 Bad Request: internal error")
        assert deliver_pending(env.platform, config=channels).to_json()["failed"] == []
        assert len(refusing.bodies()) == 1
    finally:
        refusing.close()


def test_a_slow_channel_costs_one_timeout_per_call_not_one_per_message(env, http):
    slow = HttpReceiver(delay=3 * TIMEOUT_S)
    try:
        channels = config(f"  slow: {{kind: webhook, url: '{slow.url()}', timeout_s: {TIMEOUT_S}}}\n"
                          f"  working: {{kind: webhook, url: '{http.url()}'}}", "[slow, working]",
                          delivery="{backoff_s: 0}")
        for day in ("2026-09-18", "2026-09-19", "2026-09-20"):
            open_incident(env.platform, day)
        started = time.monotonic()
        report = deliver_pending(env.platform, config=channels)
        elapsed = time.monotonic() - started
        assert len(report.failed) == 1 and len(report.deferred) == 2 and len(report.sent) == 3
        assert elapsed < 2 * TIMEOUT_S + 1, f"a slow channel held the caller {elapsed:.1f} s"
        assert len(env.ledger.notifications.attempts(channel="slow")) == 1  # the deferred ones are not attempts
    finally:
        slow.close()


def test_no_secret_reaches_the_ledger_the_report_or_the_log(env, monkeypatch, caplog):
    secret = "R0UTING-KEY-9f8e7d6c"
    monkeypatch.setenv("PAGERDUTY_ROUTING_KEY", secret)
    quoting = HttpReceiver(status=500, echo=True)  # its refusal quotes the event, routing key included
    try:
        channels = config(f"  pager: {{kind: pagerduty, url: '{quoting.url('/v2/enqueue')}', "
                          f"routing_key_env: PAGERDUTY_ROUTING_KEY}}", "[pager]", delivery="{max_attempts: 1}")
        open_incident(env.platform, DAY)
        with caplog.at_level(logging.DEBUG):
            report = deliver_pending(env.platform, config=channels)
        assert quoting.bodies()[0]["routing_key"] == secret  # the receiver was given the key
        (gave_up,) = report.gave_up
        assert "HTTP 500" in gave_up["error"] and '"routing_key": "***"' in gave_up["error"]
        recorded = str(env.ledger.notifications.attempts())
        assert secret not in recorded and secret not in str(report.to_json()) and secret not in caplog.text
        assert "HTTP 500" in caplog.text
    finally:
        quoting.close()


def test_a_missing_secret_is_a_failed_attempt_that_names_the_variable(env, http, monkeypatch):
    monkeypatch.delenv("PAGERDUTY_ROUTING_KEY", raising=False)
    channels = config(f"  pager: {{kind: pagerduty, url: '{http.url()}', routing_key_env: PAGERDUTY_ROUTING_KEY}}",
                      "[pager]")
    open_incident(env.platform, DAY)
    (failed,) = deliver_pending(env.platform, config=channels).failed
    assert failed["error"] == "$PAGERDUTY_ROUTING_KEY is not set: channel pager reads its routing key from it"
    assert http.bodies() == []


def test_a_wrong_configuration_file_is_reported_never_raised(env):
    open_incident(env.platform, DAY)
    (env.home / CONFIG_FILENAME).write_text("channels: {slack: {kind: carrier-pigeon}}\n")
    report = deliver_pending(env.platform)
    assert report.problem.startswith("nothing sent: ") and "kind 'carrier-pigeon'" in report.problem
    assert report.sent == [] and env.ledger.notifications.attempts() == []


def test_messages_pass_the_pii_redactor_before_they_are_sent_and_keep_who_acted(env, http):
    channels = config(f"  slack: {{kind: webhook, url: '{http.url()}'}}", "[slack]")
    # a title quoting a customer (a name of the source's reference extract) and an address
    incident = open_incident(env.platform, DAY, title="Consumer report: Casey Synthetic (casey@example.invalid) "
                                                      "sees no sales")
    resolve(env.platform, incident.id, summary="Avery Synthetic was told the figures are right")
    deliver_pending(env.platform, config=channels)
    opened, resolved = http.bodies()
    text = str(http.bodies())
    assert "Synthetic" not in text and "@example.invalid" not in text
    assert "Consumer report: [redacted] ([redacted]) sees no sales" in opened["text"]
    assert "Resolution: [redacted] was told the figures are right" in str(resolved["blocks"])
    # the actor is a staff identity, kept as the ledger records it
    assert {"type": "mrkdwn", "text": "*Resolved by*\noncall@atlasmart.example"} in resolved["blocks"][2]["fields"]
