"""Consumers are served certified snapshots only; the gate refuses what it cannot prove."""

import dagster as dg
import pytest

from atlasmart_dagster.definitions import ASSET_CHECKS, ASSETS
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.run_certification import certify_run
from atlasmart_dagster.product.serving import partition_status, read_certified
from atlasmart_dagster.store.clock import SystemClock
from atlasmart_dagster.store.ledger.partition_states import CERTIFICATION_REFUSED, CERTIFIED, WITHDRAWN
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch
from atlasmart_dagster_tests.team_database import deployment  # noqa: F401 - both deployments

DAY = "2026-09-20"


def reload_with_new_amount(env, amount: str):
    rows = read_rows(env.day_dir(DAY))
    write_batch(env.day_dir(DAY), [{**rows[2], "source_seq": 209, "line_amount_usd": amount}], batch_id="ERP-20260920-02")


@pytest.mark.on_s3  # reads what a team keeps in the bucket
def test_consumers_keep_the_certified_snapshot_while_a_newer_build_is_uncertified(env):
    run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
    reload_with_new_amount(env, "70.00")
    second = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill", certify=False)
    assert second.success
    served = read_certified(env.platform, "mart_finance_daily_sales")
    assert served.column("revenue_usd").to_pylist() == [185]  # not the new 205
    certify_run(env.platform, second.run_id, True)
    assert read_certified(env.platform, "mart_finance_daily_sales").column("revenue_usd").to_pylist() == [205]
    status = partition_status(env.platform, DAY)
    assert status.state == "CERTIFIED" and status.certified_version == 2 and "restated" in status.detail


@pytest.mark.on_s3  # reads what a team keeps in the bucket
def test_withdrawal_falls_back_to_the_previous_certified_version(env):
    run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
    reload_with_new_amount(env, "70.00")
    run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
    newest = env.ledger.partitions.served("mart_finance_daily_sales", DAY).certification
    env.ledger.partitions.append("mart_finance_daily_sales", DAY, WITHDRAWN, SystemClock().now(), "oncall",
                            detail={"certification_ids": [newest.id]})
    assert read_certified(env.platform, "mart_finance_daily_sales").column("revenue_usd").to_pylist() == [185]
    assert partition_status(env.platform, DAY).state == "WITHDRAWN"


def test_a_hold_refuses_certification_with_its_reason(env):
    env.ledger.holds.hold(["mart_finance_daily_sales"], DAY, DAY, "oncall", "semantic bug under investigation",
                    SystemClock().now(), incident_id="INC-0001")
    outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
    refused = {d.asset: d for d in outcome.decisions if not d.certified}
    assert set(refused) == {"mart_finance_daily_sales"}
    assert "held by INC-0001" in refused["mart_finance_daily_sales"].reasons[0]
    (event,) = env.ledger.partitions.events(asset="mart_finance_daily_sales", states=(CERTIFICATION_REFUSED,))
    assert "semantic bug" in event.reason
    assert read_certified(env.platform, "mart_finance_daily_sales").num_rows == 0  # absent, not zeros


def test_certification_is_idempotent_per_run(env):
    outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
    assert len(outcome.decisions) == 3
    assert certify_run(env.platform, outcome.run_id, True) == []
    assert len(env.ledger.partitions.events(states=(CERTIFIED,))) == 3


def test_marts_built_without_their_checks_are_not_certified(env):
    assert run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill").success
    result = dg.materialize(
        [*ASSETS, *ASSET_CHECKS],
        selection=dg.AssetSelection.assets("mart_finance_daily_sales").without_checks(),
        resources={"atlasmart": env.resource}, instance=env.instance, partition_key=DAY,
    )
    (decision,) = certify_run(env.platform, result.run_id, result.success)
    assert not decision.certified
    assert "mart_matches_agg_and_metric did not pass" in decision.reasons[0]


def test_the_gate_reads_each_snapshot_only_for_the_days_built_into_it(tmp_path, monkeypatch):
    """A range run commits one snapshot per chunk of days; certifying must not re-read every day at every one."""
    from atlasmart_dagster.definitions import build_definitions
    from atlasmart_dagster.defs.resources import AtlasmartResource
    from atlasmart_dagster.product.certification_gate import GateEvidence, decide
    from atlasmart_dagster.store.ledger.partition_states import BUILT
    from atlasmart_dagster.store.tables import CERTIFIED_ASSETS
    from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env

    env = Env(tmp_path)
    # three rows per chunk: the sample's five days land in several snapshots of each table
    resource = AtlasmartResource(home=str(env.home), landing=str(env.landing), chunk_rows=3)
    outcome = run_chain(build_definitions(resource), env.instance, resource.platform, SAMPLE_DAYS,
                        lane="backfill", certify=False)
    assert outcome.success, outcome.failures
    ledger = resource.platform.ledger
    built = ledger.partitions.events(states=(BUILT,))
    builds = [e for e in built if e.run_id == outcome.run_id and e.asset in CERTIFIED_ASSETS]
    fact_snapshots = {e.snapshot_id for e in built if e.run_id == outcome.run_id and e.asset == "fact_sales"}
    assert len(fact_snapshots) > 1

    # Every table read the gate makes goes through the warehouse's views: record each (view, table, snapshot, days).
    warehouse = resource.platform.warehouse
    scans = []

    def register(con, spec, partitions=None, snapshot_id=None, name=None):
        scans.append((name, spec.name, snapshot_id, tuple(sorted(partitions)) if partitions is not None else None))
        return type(warehouse).register(warehouse, con, spec, partitions, snapshot_id, name)

    def read(spec, partitions=None, snapshot_id=None):
        scans.append(("read", spec.name, snapshot_id, tuple(sorted(partitions)) if partitions is not None else None))
        return type(warehouse).read(warehouse, spec, partitions, snapshot_id)

    monkeypatch.setattr(warehouse, "register", register)
    monkeypatch.setattr(warehouse, "read", read)

    evidence = GateEvidence(resource.platform, builds)
    decisions = [decide(evidence, build, True) for build in builds]
    assert all(d.certified for d in decisions), [d.reasons for d in decisions if not d.certified]
    assert {(d.asset, d.partition) for d in decisions} == {(a, p) for a in CERTIFIED_ASSETS for p in SAMPLE_DAYS}

    assert {snapshot for _, asset, snapshot, _ in scans if asset == "fact_sales"} == fact_snapshots
    reads = [(view, asset, snapshot) for view, asset, snapshot, _ in scans]
    assert len(reads) == len(set(reads)), "a snapshot was read twice for the same measure"
    for view, asset, snapshot, days in scans:
        built_there = tuple(sorted(e.partition for e in built if e.asset == asset and e.snapshot_id == snapshot))
        assert days == built_there, (view, asset, snapshot)
