"""Verify tells a day that was never built (refused at the contract gate) from a day whose layers disagree."""

from pyiceberg.expressions import In

from atlasmart_dagster.ops import recovery
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.tables import FACT_SALES
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

REFUSED, GOOD = "2026-09-20", "2026-09-19"


def refuse_at_the_contract_gate(env, day: str) -> None:
    """The ERP added a field: raw admits the batch (figures intact), the contract gate stops all after raw."""
    rows = [{**row, "coupon_code": "AUTUMN"} for row in read_rows(env.day_dir(day))]
    write_batch(env.day_dir(day), rows, batch_id="ERP-20260920-01")
    outcome = run_chain(env.defs, env.instance, env.platform, [day], lane="backfill")
    assert not outcome.success and outcome.certified == []


def test_a_day_refused_at_the_contract_gate_is_reported_not_built_and_the_home_verifies(env):
    assert run_chain(env.defs, env.instance, env.platform, [GOOD], lane="backfill").success
    refuse_at_the_contract_gate(env, REFUSED)
    result = recovery.verify(env.platform)
    assert result["ok"], result["problems"]
    assert result["findings"] == []
    assert [d["partition"] for d in result["not_built"]] == [REFUSED]
    assert "never built" in result["not_built"][0]["message"]
    assert result["checked"]["days"] == 2


def test_a_real_mismatch_still_fails_verify_beside_a_day_never_built(env):
    assert run_chain(env.defs, env.instance, env.platform, [GOOD], lane="backfill").success
    refuse_at_the_contract_gate(env, REFUSED)
    env.warehouse.table(FACT_SALES).delete(In("order_id", [read_rows(env.day_dir(GOOD))[0]["order_id"]]))
    result = recovery.verify(env.platform)
    assert not result["ok"]
    assert [(f["kind"], f["partition"]) for f in result["findings"]] == [("mismatch", GOOD)]
    assert [d["partition"] for d in result["not_built"]] == [REFUSED]
