"""The ``certified`` Iceberg branch holds, day by day, exactly what ``atlasmart status`` says is served.

One real home goes through the decisions that move (or must not move) what
consumers are served: a clean load, an anomaly held then approved, a
restatement held then approved, a withdrawal, a failed rebuild of a served
day, ``maintain``. After each, the branch is read with pyiceberg's own scan of
the ref (not the product's DuckDB path) and compared with ``atlasmart --json
status``, with the gateway (``atlasmart query``) and with each day re-read at
the snapshot the status names.
"""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.defs.automation.certification_sensor import certification_tick
from atlasmart_dagster.ops.recovery.maintenance import expire_snapshots, remove_orphan_files
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.certified_branch import BRANCH, INDEX_PROPERTY, publish_certified, tag_name
from atlasmart_dagster.store.tables import CERTIFIED_ASSETS, FACT_SALES, MART_FINANCE_DAILY_SALES, TABLES_BY_NAME
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

from .test_anomaly_guard import NEXT_DAY, OWNER, day_rows, land

RESTATED = "2026-09-19"
FAILED = "2026-09-20"
ONCALL = "oncall@atlasmart.example"


def cli(env: Env, capsys, *args) -> tuple[int, str]:
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", *args])
    return code, capsys.readouterr().out


def branch_rows(env: Env, name: str) -> dict[str, list[dict]]:
    """The rows of the ``certified`` ref per day, read by pyiceberg itself."""
    table = env.warehouse.catalog.load_table(TABLES_BY_NAME[name].identifier)
    ref = table.metadata.refs.get(BRANCH)
    if ref is None:
        return {}
    by_day: dict[str, list[dict]] = defaultdict(list)
    for row in table.scan(snapshot_id=ref.snapshot_id).to_arrow().to_pylist():
        by_day[row["sales_date"].isoformat()].append(row)
    grain = TABLES_BY_NAME[name].grain
    return {day: sorted(rows, key=lambda r: tuple(str(r[c]) for c in grain)) for day, rows in by_day.items()}


def status(env: Env, capsys) -> dict[str, dict]:
    code, out = cli(env, capsys, "--json", "status")
    assert code == 0, out
    return {s["partition"]: s for s in json.loads(out)}


def gateway_revenue(env: Env, capsys) -> dict[str, Decimal]:
    code, out = cli(env, capsys, "query", "--as", "bi_reader", "--json",
                    "SELECT sales_date, revenue_usd FROM mart_finance_daily_sales ORDER BY 1")
    assert code == 0, out
    return {str(r["sales_date"]): Decimal(str(r["revenue_usd"])) for r in json.loads(out)}


def assert_branch_is_served(env: Env, capsys) -> dict[str, dict]:
    """Every certified table's branch, day by day, against status, the gateway and each day's certified snapshot."""
    days = status(env, capsys)
    for name in CERTIFIED_ASSETS:
        spec = TABLES_BY_NAME[name]
        branch = branch_rows(env, name)
        served = {day: a for day, s in days.items() for a in s["assets"] if a["asset"] == name and a["served_version"]}
        assert sorted(branch) == sorted(served), (name, sorted(branch), sorted(served))
        index = json.loads(env.warehouse.existing(spec).metadata.properties[INDEX_PROPERTY])
        for day, asset in served.items():
            entry = index[day]
            assert (entry["version"], entry["snapshot_id"], entry["fingerprint"]) == (
                asset["served_version"], asset["snapshot_id"], asset["fingerprint"]), (name, day)
            at_snapshot = env.warehouse.read(spec, [day], asset["snapshot_id"]).to_pylist()
            assert branch[day] == sorted(at_snapshot, key=lambda r: tuple(str(r[c]) for c in spec.grain)), (name, day)
            tagged = env.warehouse.ref_snapshot_id(spec, tag_name(day, asset["served_version"]))
            assert tagged == asset["snapshot_id"], (name, day)
    # fact_sales, read through the finance mart: each served day's lines add up to the mart's served revenue.
    fact = branch_rows(env, FACT_SALES.name)
    mart = {day: a for day, s in days.items() for a in s["assets"]
            if a["asset"] == MART_FINANCE_DAILY_SALES.name and a["served_version"]}
    assert sorted(fact) == sorted(mart)
    for day, asset in mart.items():
        assert str(sum(r["revenue_usd"] for r in fact[day])) == asset["controls"]["revenue_usd"], day
    # The gateway serves what the branch holds.
    finance = branch_rows(env, MART_FINANCE_DAILY_SALES.name)
    assert gateway_revenue(env, capsys) == {day: rows[0]["revenue_usd"] for day, rows in finance.items()}
    return days


@pytest.fixture
def env(tmp_path) -> Env:
    env = Env(tmp_path)
    for day in SAMPLE_DAYS:  # one run per day, as daily loads make them (the anomaly guard's history)
        assert run_chain(env.defs, env.instance, env.platform, [day], lane="backfill").certified == [day]
    return env


def test_the_branch_follows_every_serving_decision_and_nothing_else(env, capsys):
    days = assert_branch_is_served(env, capsys)  # a clean range
    assert all(days[d]["state"] == "CERTIFIED" for d in SAMPLE_DAYS)
    finance = TABLES_BY_NAME[MART_FINANCE_DAILY_SALES.name]

    # An anomaly held: built on main, absent from the branch.
    land(env, NEXT_DAY, day_rows(NEXT_DAY, 3, 209, scale=100))
    assert run_chain(env.defs, env.instance, env.platform, [NEXT_DAY], lane="current").certified == []
    days = assert_branch_is_served(env, capsys)
    assert days[NEXT_DAY]["state"] == "ANOMALY_HELD" and NEXT_DAY not in branch_rows(env, finance.name)
    assert env.warehouse.read(finance, [NEXT_DAY]).num_rows == 1  # main holds the held build

    # Approved by its owner: present.
    code, out = cli(env, capsys, "anomaly", "approve", "--day", NEXT_DAY, "--owner", OWNER, "--by",
                    "dana@atlasmart.example", "--reason", "store opening: real sales")
    assert code == 0, out
    days = assert_branch_is_served(env, capsys)
    assert days[NEXT_DAY]["state"] == "CERTIFIED" and NEXT_DAY in branch_rows(env, finance.name)

    # A restatement beyond tolerance is held (v1 stays), then approved (v2).
    v1 = branch_rows(env, finance.name)[RESTATED]
    rows = [{**r, "source_seq": r["source_seq"] + 500, "line_amount_usd": "200.00", "line_cost_usd": "120.00"}
            for r in read_rows(env.day_dir(RESTATED))]
    write_batch(env.day_dir(RESTATED), rows, batch_id="ERP-20260919-02", ready_at="2026-09-23T06:30:00Z")
    assert run_chain(env.defs, env.instance, env.platform, [RESTATED], lane="backfill").certified == []
    days = assert_branch_is_served(env, capsys)
    assert days[RESTATED]["state"] == "RESTATEMENT_HELD" and branch_rows(env, finance.name)[RESTATED] == v1
    code, out = cli(env, capsys, "restatement", "approve", "--partition", RESTATED, "--owner", OWNER,
                    "--by", "erp data owner", "--reason", "the ERP corrected the prices")
    assert code == 0, out
    days = assert_branch_is_served(env, capsys)
    assert days[RESTATED]["certified_version"] == 2
    assert branch_rows(env, finance.name)[RESTATED][0]["revenue_usd"] == Decimal("200.00")

    # A withdrawal of v2 (an incident's containment): consumers go back to v1, on the branch too, at once
    # (the command publishes; it does not wait for the sensor's next tick).
    code, out = cli(env, capsys, "incident", "report", "--text", "19 September looks doubled", "--asset",
                    finance.name, "--partition", RESTATED, "--json")
    assert code == 0, out
    incident = json.loads(out)["incident"]
    code, out = cli(env, capsys, "incident", "contain", incident, "--withdraw-served", "--from", RESTATED, "--to",
                    RESTATED, "--actor", ONCALL, "--json")
    assert code == 0, out
    assert branch_rows(env, finance.name)[RESTATED] == v1  # published by the command itself
    assert gateway_revenue(env, capsys)[RESTATED] == v1[0]["revenue_usd"]
    certification_tick(env.instance, env.platform, None, actor="certification_sensor")  # nothing left to converge
    days = assert_branch_is_served(env, capsys)
    assert days[RESTATED]["state"] == "WITHDRAWN" and branch_rows(env, finance.name)[RESTATED] == v1

    # A failed rebuild of a served day: main may change, the branch does not.
    before = {name: branch_rows(env, name) for name in CERTIFIED_ASSETS}
    renamed = [{("gross_line_amount_usd" if k == "line_amount_usd" else k): v for k, v in r.items()}
               for r in read_rows(env.day_dir(FAILED))]  # a re-send the contract gate stops
    write_batch(env.day_dir(FAILED), [{**r, "source_seq": r["source_seq"] + 600} for r in renamed],
                batch_id="ERP-20260920-02", ready_at="2026-09-23T06:30:00Z")
    assert not run_chain(env.defs, env.instance, env.platform, [FAILED], lane="backfill").success
    assert {name: branch_rows(env, name) for name in CERTIFIED_ASSETS} == before
    assert_branch_is_served(env, capsys)

    # maintain keeps the branch head and every tagged version, and removes no file the branch reads.
    expire_snapshots(env.platform, keep_last=1)
    remove_orphan_files(env.platform, min_age_seconds=0)
    assert {name: branch_rows(env, name) for name in CERTIFIED_ASSETS} == before
    assert_branch_is_served(env, capsys)
    assert publish_certified(env.platform) == {}  # converged: nothing to commit


def test_a_crash_between_the_ledger_and_the_branch_converges_on_the_next_tick(env, capsys, monkeypatch):
    """The ledger decides; if the process dies before the publish, the branch is behind, never ahead."""
    finance = MART_FINANCE_DAILY_SALES.name
    before = branch_rows(env, finance)
    from atlasmart_dagster.product import run_certification

    def killed(platform, states=None):
        raise SystemExit("killed between the ledger's decision and the branch's publish")

    land(env, NEXT_DAY, day_rows(NEXT_DAY, 3, 209))
    monkeypatch.setattr(run_certification, "converge", killed)
    with pytest.raises(SystemExit):
        run_chain(env.defs, env.instance, env.platform, [NEXT_DAY], lane="current")
    monkeypatch.undo()
    assert status(env, capsys)[NEXT_DAY]["state"] == "CERTIFIED"  # the ledger decided
    assert branch_rows(env, finance) == before  # the branch is behind (never ahead of the ledger)
    assert gateway_revenue(env, capsys).keys() == set(SAMPLE_DAYS) | {NEXT_DAY}  # the gateway does not read it
    certification_tick(env.instance, env.platform, None, actor="certification_sensor")
    assert NEXT_DAY in branch_rows(env, finance)
    assert_branch_is_served(env, capsys)
