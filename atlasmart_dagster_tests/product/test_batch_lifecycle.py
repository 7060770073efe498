"""Restatement guard, batch retirement and owner-approved field mappings, through real runs.

The worked example of the README: a truthful re-send of 2026-09-19 with every
amount doubled is built and checked, held by the guard (consumers keep v1),
then rejected by retiring the batch; the reload certifies v1's content again.
"""

import pytest

from atlasmart_dagster.domain.controls import ControlTuple
from atlasmart_dagster.errors import SourceNotReady
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.batch_lifecycle import RETIRED, BatchDecisionError, decide
from atlasmart_dagster.product.contract_approvals import approve_mapping
from atlasmart_dagster.product.readiness import prepare_partition
from atlasmart_dagster.product.restatements import RestatementError, approve_restatement, held_builds
from atlasmart_dagster.product.run_certification import certify_and_deliver
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster.store.warehouse import duckdb_connection
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAY = "2026-09-19"
V1 = ControlTuple(1, 1, 1, 100, 60, 40)
DOUBLED = ControlTuple(1, 1, 1, 200, 120, 80)


def run(env, day=DAY):
    return run_chain(env.defs, env.instance, env.platform, [day], lane="backfill")


def served(env, day=DAY):
    version = env.ledger.partitions.served("mart_finance_daily_sales", day)
    return (version.certification.controls, version.version) if version else None


def resend(env, day=DAY, batch_id="ERP-20260919-02", change=lambda row: row, **manifest):
    rows = [change({**r, "source_seq": r["source_seq"] + 100}) for r in read_rows(env.day_dir(day))]
    return write_batch(env.day_dir(day), rows, batch_id=batch_id, **manifest)


def doubled(row):
    return {**row, "line_amount_usd": f"{2 * float(row['line_amount_usd']):.2f}",
            "line_cost_usd": f"{2 * float(row['line_cost_usd']):.2f}"}


def test_a_restatement_beyond_tolerance_is_held_and_a_rejected_batch_leaves_v1_served(env):
    assert run(env).certified == [DAY] and served(env) == (V1, 1)
    resend(env, change=doubled)
    held = run(env)
    assert held.success and held.certified == []  # built and checked, not certified
    assert any("restatement held" in r and "revenue_usd 100.00 -> 200.00 (+100%" in r
               for d in held.decisions for r in d.reasons)
    status = partition_status(env.platform, DAY)
    assert status.state == "RESTATEMENT_HELD" and served(env) == (V1, 1)

    decide(env.platform, "ERP-20260919-02", RETIRED, "finance-owner", "doubled amounts: ERP bug", env.platform.clock.now())
    reloaded = run(env)
    assert reloaded.certified == [DAY]
    assert served(env) == (V1, 1)  # the same content: still version 1, not a restatement
    assert partition_status(env.platform, DAY).state == "CERTIFIED"
    assert [b.batch_id for b in env.platform.raw_store.batches(DAY)] == ["ERP-20260919-01", "ERP-20260919-02"]


def test_the_owner_approves_exactly_the_held_figures_and_they_become_the_next_version(env):
    run(env)
    resend(env, change=doubled)
    run(env)
    with pytest.raises(RestatementError, match="owned by 'erp-operations'"):
        approve_restatement(env.platform, DAY, "someone-else", "me", "ok", env.platform.clock.now())
    assert approve_restatement(env.platform, DAY, "erp-operations", "dana", "price correction confirmed",
                               env.platform.clock.now()) == DOUBLED
    decisions = certify_and_deliver(env.platform, held_builds(env.platform, DAY), True, "dana")
    assert decisions and all(d.certified for d in decisions)
    assert served(env) == (DOUBLED, 2) and partition_status(env.platform, DAY).state == "CERTIFIED"


def test_a_restatement_within_tolerance_is_certified_as_the_next_version(env):
    run(env)
    resend(env, change=lambda r: {**r, "line_amount_usd": "110.00"})
    assert run(env).certified == [DAY] and served(env) == (ControlTuple(1, 1, 1, 110, 60, 50), 2)


def test_a_drifted_batch_blocks_its_day_until_retired_then_the_conformant_resend_recovers_it(env):
    drifted = [{("qty" if k == "quantity" else k): v for k, v in r.items()} for r in read_rows(env.day_dir(DAY))]
    write_batch(env.day_dir(DAY), drifted, batch_id="ERP-20260919-01")
    assert not run(env).success and served(env) is None
    resend(env, change=lambda r: {("quantity" if k == "qty" else k): v for k, v in r.items()})
    assert not run(env).success  # the drifted batch is still part of the day
    decide(env.platform, "ERP-20260919-01", RETIRED, "oncall", "superseded by the conformant re-send",
           env.platform.clock.now())
    assert run(env).certified == [DAY] and served(env) == (V1, 1)


def test_a_field_mapping_is_data_the_owner_approves_not_code(env):
    drifted = [{("qty" if k == "quantity" else k): v for k, v in r.items()} for r in read_rows(env.day_dir(DAY))]
    write_batch(env.day_dir(DAY), drifted, batch_id="ERP-20260919-01")
    assert not run(env).success
    with pytest.raises(Exception, match="not a field of the contract"):
        approve_mapping(env.ledger, "ERP-20260919-01", DAY, "v1", {"qty": "qty_total"}, "erp-operations", "dana",
                        "rename", env.platform.clock.now())
    approve_mapping(env.ledger, "ERP-20260919-01", DAY, "v1", {"qty": "quantity"}, "erp-operations", "dana",
                    "the ERP renamed quantity to qty", env.platform.clock.now())
    assert run(env).certified == [DAY] and served(env) == (V1, 1)


def test_a_retired_landed_batch_with_no_other_is_not_ready(env):
    run(env)
    decide(env.platform, "ERP-20260919-01", RETIRED, "oncall", "wrong day's file", env.platform.clock.now())
    with pytest.raises(SourceNotReady, match="retired by oncall"):
        prepare_partition(env.platform, DAY, env.platform.clock.now(), duckdb_connection())
    with pytest.raises(BatchDecisionError, match="no batch NOPE"):
        decide(env.platform, "NOPE", RETIRED, "oncall", "x", env.platform.clock.now())


def test_manifest_control_totals_are_reconciled_on_admission(env):
    resend(env, batch_id="ERP-20260919-01", control_totals={"line_amount_usd": "150.00", "quantity": 1})
    with pytest.raises(SourceNotReady, match="totals line_amount_usd at 150.00, the rows of order_lines.jsonl add up to"):
        prepare_partition(env.platform, DAY, env.platform.clock.now(), duckdb_connection())
    rows = read_rows(env.day_dir(DAY))
    total = sum(float(r["line_amount_usd"]) for r in rows)
    write_batch(env.day_dir(DAY), rows, batch_id="ERP-20260919-01", control_totals={"line_amount_usd": f"{total:.2f}"})
    assert run(env).certified == [DAY]
