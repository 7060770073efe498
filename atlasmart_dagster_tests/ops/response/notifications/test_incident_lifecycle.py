"""A real incident from opened to resolved, told as it goes: Slack-style messages and PagerDuty events to on-call,
the consumer notice by mail to the groups that read the affected products."""

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.domain.check_names import AGG_MATCHES_FACT
from atlasmart_dagster.ops.response.notifications import deliver_pending

from ..incidents.consumer_language import problems
from ..incidents.faulted_days import corrupted_aggregate
from .incidents_to_tell import config

DAY = "2026-09-20"
ROUTING_KEY = "R0UTING-KEY-lifecycle"
ONCALL = "oncall@atlasmart.example"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGERDUTY_ROUTING_KEY", ROUTING_KEY)
    return corrupted_aggregate(tmp_path, DAY)


def cli(env, capsys, *args) -> int:
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical", "--ephemeral-instance",
                 *args])
    capsys.readouterr()
    return code


def test_an_incident_opened_then_resolved_is_told_to_oncall_and_consumers(env, capsys, http, smtp):
    channels = config(
        f"  oncall-slack: {{kind: webhook, url: '{http.url('/slack')}'}}\n"
        f"  oncall-pager: {{kind: pagerduty, url: '{http.url('/v2/enqueue')}', "
        f"routing_key_env: PAGERDUTY_ROUTING_KEY}}\n"
        f"  consumer-mail: {{kind: email, host: 127.0.0.1, port: {smtp.port}, from: atlasmart@atlasmart.example}}",
        "[oncall-slack, oncall-pager]", consumers="[consumer-mail]")
    graph = env.defs.resolve_asset_graph()

    def deliver():
        report = deliver_pending(env.platform, graph=graph, instance=env.instance, config=channels)
        assert report.problem is None and not report.failed and not report.gave_up, report.to_json()
        return report

    assert cli(env, capsys, "incident", "detect") == 0
    deliver()
    (opened,) = http.bodies("/slack")
    assert opened["text"] == f"INC-0001 opened: Check failed: agg_daily_sales:{AGG_MATCHES_FACT} for {DAY}"
    assert opened["blocks"][0] == {"type": "header", "text": {"type": "plain_text", "text": "INC-0001 opened"}}
    (trigger,) = http.bodies("/v2/enqueue")
    assert (trigger["event_action"], trigger["dedup_key"], trigger["routing_key"]) == ("trigger", "INC-0001",
                                                                                       ROUTING_KEY)
    assert trigger["payload"]["severity"] == "error" and trigger["payload"]["custom_details"]["days"] == [DAY]
    assert trigger["payload"]["summary"] == opened["text"] and trigger["payload"]["source"].startswith("atlasmart")

    for step in (["contain", "INC-0001", "--actor", ONCALL], ["triage", "INC-0001"],
                 ["notify", "INC-0001", "--stage", "initial", "--summary", f"Figures for {DAY} are being checked",
                  "--repair", "rebuilding the day", "--next-update", "at 12:00 UTC", "--restated"],
                 ["repair", "INC-0001", "--from", DAY, "--to", DAY, "--start-at", "agg_daily_sales", "--reason",
                  "rebuild agg from facts"],
                 ["verify", "INC-0001"], ["resolve", "INC-0001", "--summary", "aggregate rebuilt and re-certified"]):
        assert cli(env, capsys, "incident", *step) == 0, step
        deliver()

    headlines = [b["blocks"][0]["text"]["text"] for b in http.bodies("/slack")]
    assert headlines == ["INC-0001 opened", "INC-0001: 3 certifications withdrawn", "INC-0001 is contained",
                         "INC-0001 is identified", "INC-0001 is repairing", "INC-0001 is verifying",
                         "INC-0001 resolved"]
    events = [(e["event_action"], e["dedup_key"]) for e in http.bodies("/v2/enqueue")]
    assert events == [("trigger", "INC-0001")] + [("acknowledge", "INC-0001")] * 4 + [("resolve", "INC-0001")]

    # the aggregate feeds both marts: both groups read an affected product
    assert sorted(rcpt for rcpt, _ in smtp.mails) == [["exec-reporting@atlasmart.example"],
                                                      ["finance-data@atlasmart.example"]]
    for _, mail in smtp.mails:
        body = mail.get_content().replace("\r\n", "\n")
        assert mail["Subject"] == f"[AtlasMart] Data notice INC-0001 (initial): Figures for {DAY} are being checked"
        assert "**Will figures be restated?** Yes" in body and "this notice concerns data products you read" in body
        assert not problems(env, body, {}), "a consumer's mail names the platform's internals"
    assert deliver_pending(env.platform, graph=graph, config=channels).sent == []  # everything was told once
