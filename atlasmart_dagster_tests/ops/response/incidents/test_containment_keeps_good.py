"""Containment freezes the suspect version: a held re-send of a certified day leaves its certified version served."""

import json

from atlasmart_dagster.product.serving import partition_status

from .test_restatement_incident import DAY, ONCALL, cli, held  # noqa: F401 - the fixture

RESEND = "ERP-20260919-02"


def bi_revenue(env, capsys) -> list[str]:
    """The revenue of the day as a BI reader sees it through the gateway (nothing when the day is not served)."""
    code, out = cli(env, capsys, "query", "--as", "bi_reader", "--json",
                    f"SELECT revenue_usd FROM mart_finance_daily_sales WHERE sales_date = DATE '{DAY}'")
    assert code == 0, out
    return [str(row["revenue_usd"]) for row in json.loads(out)]


def held_by(env) -> bool:
    return any(h["incident_id"] == env.incident for h in env.ledger.holds.active())


def contain(env, capsys) -> dict:
    code, out = cli(env, capsys, "incident", "contain", env.incident, "--actor", ONCALL, "--json")
    assert code == 0, out
    return json.loads(out)


def test_contain_keeps_serving_the_good_version_and_holds_only_the_resend(held, capsys):  # noqa: F811
    assert bi_revenue(held, capsys) == ["100.00"]
    contained = contain(held, capsys)
    assert contained["withdrawn"] == []
    assert {(k["asset"], k["partition"], k["version"]) for k in contained["kept"]} == {
        ("metric_gross_revenue", DAY, 1), ("mart_finance_daily_sales", DAY, 1), ("mart_executive_revenue", DAY, 1)}
    assert contained["hold_id"] is not None and held_by(held)
    assert bi_revenue(held, capsys) == ["100.00"]  # consumers keep v1
    status = partition_status(held.platform, DAY)
    assert status.certified_version == 1 and status.state == "RESTATEMENT_HELD"

    shown = json.loads(cli(held, capsys, "incident", "show", held.incident, "--json")[1])
    assert f"consumers keep certified version 1 of {DAY}" in shown["timeline"][-2]["message"]
    code, out = cli(held, capsys, "incident", "notify", held.incident, "--stage", "update", "--json",
                    "--summary", "Figures of 19 September stand while a correction is checked.")
    assert "consumers keep version 1" in json.loads(out)["day_status"][DAY]


def test_the_contain_command_says_which_version_consumers_keep(held, capsys):  # noqa: F811
    code, out = cli(held, capsys, "incident", "contain", held.incident, "--actor", ONCALL)
    assert code == 0
    assert out.startswith(f"withdrew 0 certifications; consumers keep certified version 1 of {DAY} "
                          "(the suspect re-send held for its owner was never certified); certification held for")


def test_verify_after_keeping_v1_waits_for_the_owner_then_passes_on_a_rejected_resend(held, capsys):  # noqa: F811
    contain(held, capsys)
    repair = ("incident", "repair", held.incident, "--from", DAY, "--to", DAY, "--actor", ONCALL, "--json")
    cli(held, capsys, *repair, "--reason", "rebuild the day")
    code, out = cli(held, capsys, "incident", "verify", held.incident, "--actor", ONCALL, "--json")
    assert code == 1 and any("the data owner must approve the figures" in m for m in json.loads(out)["missing"])
    assert held_by(held) and bi_revenue(held, capsys) == ["100.00"]

    assert cli(held, capsys, "batch", "retire", RESEND, "--by", "finance-owner", "--reason", "doubled amounts")[0] == 0
    cli(held, capsys, *repair, "--reason", "reload without the rejected re-send")
    code, out = cli(held, capsys, "incident", "verify", held.incident, "--actor", ONCALL, "--json")
    data = json.loads(out)
    assert code == 0 and data["passed"], data["missing"]
    assert not held_by(held) and bi_revenue(held, capsys) == ["100.00"]
    status = partition_status(held.platform, DAY)
    assert (status.state, status.certified_version) == ("CERTIFIED", 1)
    assert cli(held, capsys, "incident", "resolve", held.incident, "--summary", "re-send rejected; v1 stands")[0] == 0


def test_an_approved_resend_is_certified_as_v2_only_by_verification(held, capsys):  # noqa: F811
    contain(held, capsys)
    code, out = cli(held, capsys, "restatement", "approve", "--partition", DAY, "--owner", "erp-operations",
                    "--by", "erp data owner", "--reason", "the ERP corrected the prices", "--incident", held.incident)
    assert code == 1  # the incident's hold refuses the certification for now
    assert bi_revenue(held, capsys) == ["100.00"]
    cli(held, capsys, "incident", "repair", held.incident, "--from", DAY, "--to", DAY, "--actor", ONCALL,
        "--reason", "rebuild with the approved re-send")
    code, out = cli(held, capsys, "incident", "verify", held.incident, "--actor", ONCALL, "--json")
    assert code == 0 and json.loads(out)["passed"]
    assert bi_revenue(held, capsys) == ["200.00"]
    assert partition_status(held.platform, DAY).certified_version == 2


def test_an_operator_who_doubts_the_served_version_withdraws_it(held, capsys):  # noqa: F811
    code, out = cli(held, capsys, "incident", "contain", held.incident, "--withdraw-served", "--actor", ONCALL,
                    "--json")
    assert code == 0
    contained = json.loads(out)
    assert len(contained["withdrawn"]) == 3 and contained["kept"] == []
    assert bi_revenue(held, capsys) == []


def test_the_first_notice_of_a_withdrawn_day_with_nothing_served_says_unavailable(held, capsys):  # noqa: F811
    code, out = cli(held, capsys, "incident", "contain", held.incident, "--withdraw-served", "--actor", ONCALL,
                    "--json")
    assert code == 0 and bi_revenue(held, capsys) == []
    code, out = cli(held, capsys, "incident", "notify", held.incident, "--stage", "initial", "--json",
                    "--summary", "Figures of 19 September are withdrawn while they are checked.")
    notice = json.loads(out)
    assert "unavailable" in notice["impact"] and "under investigation" not in notice["impact"]
    assert "unavailable" in notice["impact_per_day"][DAY]
    assert "nothing is available" in notice["day_status"][DAY]
