"""Each consumer group is told, in consumer words, the notices that name a product it reads, as the asset graph says."""

from atlasmart_dagster.ops.response.incidents.notices import to_markdown
from atlasmart_dagster.ops.response.incidents.workflow import IncidentWorkflow
from atlasmart_dagster.ops.response.notifications import deliver_pending
from atlasmart_dagster.ops.response.notifications.outbox import consumer_groups

from ..incidents.consumer_language import problems
from .incidents_to_tell import config, open_incident

DAY = "2026-09-20"
ONCALL = "oncall@atlasmart.example"
FINANCE, EXECUTIVES = "finance-data@atlasmart.example", "exec-reporting@atlasmart.example"


def mail_channel(smtp) -> str:
    return (f"  mail: {{kind: email, host: 127.0.0.1, port: {smtp.port}, from: atlasmart@atlasmart.example, "
            f"to: {ONCALL}}}")


def slack_texts(value) -> list[str]:
    """Every text a Slack message shows (its fallback text and each block's), as a reader sees them."""
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in ([v] if k == "text" and isinstance(v, str) else slack_texts(v))]
    if isinstance(value, list):
        return [t for v in value for t in slack_texts(v)]
    return []


def notify(env, incident_id: str, origin: str | None) -> dict:
    workflow = IncidentWorkflow(env.platform, env.defs)
    if origin:
        workflow.identify(incident_id, ONCALL, origin_asset=origin)
    return workflow.notify(incident_id, ONCALL, stage="initial", summary=f"Figures for {DAY} are being checked.",
                           repair="the day is rebuilt from the raw batches", next_update="at 10:00 UTC",
                           restated=True)


def test_the_groups_and_what_they_read_come_from_the_asset_graph(env):
    groups = {g.name: g for g in consumer_groups(env.defs.resolve_asset_graph())}
    assert {n: g.contact for n, g in groups.items()} == {"consumer_group_executives": EXECUTIVES,
                                                         "consumer_group_finance": FINANCE}
    assert set(groups["consumer_group_finance"].product_names) >= {"Finance daily sales",
                                                                   "Finance daily sales dashboard"}
    assert "Finance daily sales" not in groups["consumer_group_executives"].product_names
    executives = set(groups["consumer_group_executives"].product_names)
    assert {"Executive revenue", "Executive revenue dashboard"} <= executives


def test_a_notice_is_mailed_to_the_contact_of_each_group_reading_a_product_it_names(env, smtp):
    incident = open_incident(env.platform, DAY)
    notice = notify(env, incident.id, origin="mart_finance_daily_sales")  # the radius: finance's mart and dashboard
    assert notice["affected_products"] == ["Finance daily sales", "Finance daily sales dashboard"]
    report = deliver_pending(env.platform, graph=env.defs.resolve_asset_graph(), config=config(
        mail_channel(smtp), "[mail]", consumers="[mail]"))
    assert report.problem is None and not report.failed
    to_consumers = [(rcpt, mail) for rcpt, mail in smtp.mails if rcpt != [ONCALL]]
    (rcpt, mail), = to_consumers  # the executives read none of it: they are not written to
    assert rcpt == [FINANCE] and mail["To"] == FINANCE
    assert mail["Subject"] == f"[AtlasMart] Data notice {incident.id} (initial): Figures for {DAY} are being checked."
    body = mail.get_content().replace("\r\n", "\n")  # SMTP carries CRLF line ends
    assert body.count(to_markdown(notice).strip()) == 1  # the notice itself, as `incident notify` renders it
    assert "this notice concerns data products you read: Finance daily sales" in body
    assert not problems(env, body, {}), "a consumer's mail names the platform's internals"
    assert incident.title not in body  # the on-call title names the check; consumers never see it
    oncall_subjects = [m["Subject"] for rcpt, m in smtp.mails if rcpt == [ONCALL]]
    assert oncall_subjects[0].startswith(f"[AtlasMart] {incident.id} opened: Check failed: agg_daily_sales")


def test_a_notice_naming_no_product_goes_to_every_group(env, smtp):
    incident = open_incident(env.platform, DAY)
    assert notify(env, incident.id, origin=None)["affected_products"] == ["Daily sales data products"]
    deliver_pending(env.platform, config=config(mail_channel(smtp), "[]", consumers="[mail]"))
    assert sorted(rcpt for rcpt, _ in smtp.mails) == [[EXECUTIVES], [FINANCE]]


def test_a_group_can_have_its_own_channels_and_a_route_naming_an_unknown_group_is_refused(env, smtp, http):
    incident = open_incident(env.platform, DAY)
    notify(env, incident.id, origin=None)
    channels = (f"{mail_channel(smtp)}\n  exec-slack: {{kind: webhook, url: '{http.url('/exec')}'}}")
    routed = config(channels, "[]", consumers="[mail]\n  consumer_groups: {consumer_group_executives: [exec-slack]}")
    report = deliver_pending(env.platform, graph=env.defs.resolve_asset_graph(), config=routed)
    assert [(s["route"], s["channel"]) for s in report.sent] == [("consumer_group_executives", "exec-slack"),
                                                                  ("consumer_group_finance", "mail")]
    (post,) = http.bodies("/exec")
    assert post["text"] == f"Data notice {incident.id} (initial): Figures for {DAY} are being checked."
    assert post["blocks"][0] == {"type": "header", "text": {"type": "plain_text",
                                                            "text": f"Data notice {incident.id} (initial)"}}
    assert not problems(env, "\n".join(slack_texts(post)), {})

    wrong = config(channels, "[]", consumers="[mail]\n  consumer_groups: {consumer_group_marketing: [exec-slack]}")
    report = deliver_pending(env.platform, graph=env.defs.resolve_asset_graph(), config=wrong)
    assert "consumer_group_marketing, which the code location does not have" in report.problem


def test_the_executives_alone_hear_of_their_own_products(env, smtp):
    incident = open_incident(env.platform, DAY)
    notify(env, incident.id, origin="mart_executive_revenue")
    deliver_pending(env.platform, config=config(mail_channel(smtp), "[]", consumers="[mail]"))
    assert [rcpt for rcpt, _ in smtp.mails] == [[EXECUTIVES]]
