"""Consumer notices speak the consumer's language for every kind of incident, and name every cause's impact."""

import hashlib
import json

import dagster as dg
import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.domain.check_names import AGG_MATCHES_FACT
from atlasmart_dagster.drills.faults import corrupt_aggregate_cost
from atlasmart_dagster.ops.runs.chains import run_chain, run_checks
from atlasmart_dagster.product.dashboards import EXECUTIVE_DASHBOARD, Dashboard, Tile
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import Env

from .consumer_language import internal_names, notices_in, problems

HISTORY = ["2026-09-17", "2026-09-18", "2026-09-19", "2026-09-20"]
WRONG_DAY = "2026-09-18"  # has marketplace sales, so a tile without marketplace is wrong that day
LATE_DAY = "2026-09-21"
ONCALL = "oncall@atlasmart.example"


def cli(env, capsys, *args):
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical", "--ephemeral-instance",
                 *args])
    return code, capsys.readouterr().out


def hand_written_revenue_dashboard() -> Dashboard:
    tiles = tuple(Tile(t.key, t.title, "SELECT sales_date, revenue_web_usd + revenue_store_usd AS value "
                                       "FROM mart_executive_revenue", t.governed_metric) if t.governed_metric else t
                  for t in EXECUTIVE_DASHBOARD.tiles)
    return Dashboard(EXECUTIVE_DASHBOARD.asset, EXECUTIVE_DASHBOARD.title, "1.1.0", tiles)


def deliver_part_of_the_day(env, partition: str) -> None:
    """The ERP sends one of the two order lines it announces; the manifest's hash matches what it sent."""
    data = env.day_dir(partition) / "order_lines.jsonl"
    data.write_text(data.read_text().splitlines()[0] + "\n")
    manifest_path = env.day_dir(partition) / "_manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["data_sha256"] = hashlib.sha256(data.read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest, indent=2))


@pytest.fixture
def troubled(tmp_path, capsys):
    """Three incidents: a corrupted aggregate whose dashboard is also wrong, a wrong dashboard, a partial late batch."""
    env = Env(tmp_path, clock="logical")
    clock = LogicalClock(env.home / "clock.json")
    clock.set("2026-09-22T07:00:00Z")
    assert run_chain(env.defs, env.instance, env.platform, HISTORY, lane="backfill").success
    corrupt_aggregate_cost(env.platform, WRONG_DAY, +10)
    assert not run_checks(env.defs, env.instance, [dg.AssetCheckKey(dg.AssetKey("agg_daily_sales"), AGG_MATCHES_FACT)],
                          WRONG_DAY).success
    (env.root / "dashboard.json").write_text(json.dumps(hand_written_revenue_dashboard().to_json()))
    assert cli(env, capsys, "dashboard", "deploy", "--file", str(env.root / "dashboard.json"))[0] == 0
    assert cli(env, capsys, "dashboard", "check")[0] == 0
    deliver_part_of_the_day(env, LATE_DAY)
    clock.set("2026-09-22T08:05:00Z")  # the manifest is ready (08:04), the batch is not whole
    assert not run_chain(env.defs, env.instance, env.platform, [LATE_DAY], lane="current").success  # blocked
    clock.set("2026-09-22T08:40:00Z")
    code, out = cli(env, capsys, "incident", "detect", "--json")
    env.incidents = json.loads(out)
    return env


def notify_all(env, capsys) -> dict[str, dict]:
    by_day = {}
    for incident_id in env.incidents:
        assert cli(env, capsys, "incident", "triage", incident_id, "--json")[0] == 0
        code, out = cli(env, capsys, "incident", "notify", incident_id, "--stage", "initial", "--json",
                        "--summary", "Some daily sales figures are affected; details below.",
                        "--repair", "rebuilding the affected days", "--next-update", "at 10:00 UTC",
                        "--out", str(env.root / "notices"))
        notice = json.loads(out)
        for day in notice["affected_days"]:
            by_day[day] = notice
    return by_day


def test_notices_of_every_incident_kind_speak_the_consumer_language(troubled, capsys):
    by_day = notify_all(troubled, capsys)
    assert set(by_day) == {"2026-09-17", WRONG_DAY, LATE_DAY}
    written = notices_in(troubled.root / "notices")
    assert len(written) == len(troubled.incidents) == 3
    for name, markdown, notice in written:
        assert not problems(troubled, markdown, notice), name
        assert notice["affected_products"] and notice["observed_vs_expected"] and notice["next_update"] == "at 10:00 UTC"
    # the scan is not vacuous: it flags the evidence the notices were written from
    evidence = [s for inc in troubled.incidents for s in _incident(troubled, capsys, inc)["signals"]]
    raw_lines = "\n".join(f"{s['detail']} (observed {s.get('observed')}, expected {s.get('expected')})" for s in evidence)
    flagged = problems(troubled, raw_lines, {"signals": evidence})
    for expected in ("'agg_matches_fact'", "'agg_daily_sales'", "'expected_rows'", "'order_lines.jsonl'",
                     "'golden_matches_governed_metric'", "run id", "dict repr"):
        assert any(expected in f for f in flagged), expected
    assert "ERP-20260918-01" in internal_names(troubled)


def test_every_cause_shapes_the_impact_with_figures(troubled, capsys):
    by_day = notify_all(troubled, capsys)
    # a corrupted aggregate (held back; the certified version stays) and a dashboard showing too little revenue
    both = by_day[WRONG_DAY]
    assert both["impact"] == "late and wrong"
    figures = {(i["observed"], i["expected"]) for i in both["observed_vs_expected"]}
    assert ("cost 230.00 USD; gross profit 165.00 USD", "cost 220.00 USD; gross profit 175.00 USD") in figures
    assert "Executive revenue dashboard" in both["affected_products"]
    assert by_day["2026-09-17"]["impact"] == "wrong"
    # a partial batch that is also past its deadline: incomplete, and late
    partial = by_day[LATE_DAY]
    assert partial["impact"] == "late and incomplete"
    assert ("1 of 2 order lines received", "all 2 order lines the source system announced") in {
        (i["observed"], i["expected"]) for i in partial["observed_vs_expected"]}
    assert partial["current_state_per_day"] == {LATE_DAY: "DELAYED"}
    assert partial["day_status"][LATE_DAY] == "not available yet: it was due by 08:30 UTC on 2026-09-22"


def _incident(env, capsys, incident_id):
    return json.loads(cli(env, capsys, "incident", "show", incident_id, "--json")[1])
