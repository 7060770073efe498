"""Blocking checks stop the marts and certification; the ledger then shows no new certification."""

import dagster as dg
import pyarrow as pa

from atlasmart_dagster.definitions import ASSET_CHECKS, ASSETS
from atlasmart_dagster.domain.check_names import AGG_MATCHES_FACT, SOURCE_CONTRACT_CONFORMS
from atlasmart_dagster.ops.runs import run_chain
from atlasmart_dagster.product.run_certification import certify_run
from atlasmart_dagster.store.ledger.partition_states import CERTIFIED
from atlasmart_dagster.store.tables import AGG_DAILY_SALES
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAY = "2026-09-20"
MARTS = ["metric_gross_revenue", "mart_finance_daily_sales", "mart_executive_revenue"]


def materialized_keys(result):
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def test_corrupted_aggregate_is_caught_and_blocks_marts(env):
    assert run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill").success
    certifications_before = env.ledger.partitions.events(states=(CERTIFIED,))

    rows = env.warehouse.read(AGG_DAILY_SALES, [DAY]).to_pylist()
    rows[0]["cost_usd"] += 10
    rows[0]["gross_profit_usd"] -= 10
    env.warehouse.overwrite(AGG_DAILY_SALES, pa.Table.from_pylist(rows, AGG_DAILY_SALES.arrow_schema()), [DAY], {"run_id": "tamper"})

    result = dg.materialize(
        [*ASSETS, *ASSET_CHECKS],
        selection=dg.AssetSelection.assets(*MARTS) | dg.AssetSelection.checks(dg.AssetCheckKey(dg.AssetKey("agg_daily_sales"), AGG_MATCHES_FACT)),
        resources={"atlasmart": env.resource},
        instance=env.instance,
        partition_key=DAY,
        tags={"atlasmart/lane": "backfill"},
        raise_on_error=False,
    )
    assert not result.success
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.check_name == AGG_MATCHES_FACT and not evaluation.passed
    shown = evaluation.metadata["observed_vs_expected"].value[DAY]
    assert shown["observed"]["cost_usd"] == "140.00" and shown["expected"]["cost_usd"] == "130.00"
    assert materialized_keys(result) == set()  # no mart was built
    assert certify_run(env.platform, result.run_id, result.success) == []
    assert env.ledger.partitions.events(states=(CERTIFIED,)) == certifications_before


def test_schema_drift_fails_the_contract_gate_and_nothing_downstream_builds(env):
    rows = read_rows(env.day_dir(DAY))
    for row in rows:
        row["gross_line_amount_usd"] = row.pop("line_amount_usd")
    write_batch(env.day_dir(DAY), rows, batch_id="ERP-20260920-01")
    outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
    assert not outcome.success
    assert materialized_keys(outcome.result) == {"raw_order_lines"}
    evaluation = next(e for e in outcome.result.get_asset_check_evaluations() if e.check_name == SOURCE_CONTRACT_CONFORMS)
    assert not evaluation.passed
    layout = evaluation.metadata["observed_vs_expected"].value[DAY]["observed"]["ERP-20260920-01"]
    assert layout == {"contract": "v1", "missing": ["line_amount_usd"], "unexpected": ["gross_line_amount_usd"]}
    assert outcome.certified == [] and env.ledger.partitions.events(states=(CERTIFIED,)) == []
