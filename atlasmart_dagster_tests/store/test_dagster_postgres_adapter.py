"""The team instance's event log: Dagster's Postgres storage, with a step's check evaluations in one transaction."""

import threading

import dagster as dg
import pytest
from dagster_postgres.event_log import PostgresEventLogStorage

from atlasmart_dagster.store.instance.dagster_postgres_adapter import BatchingPostgresEventLogStorage
from atlasmart_dagster_tests.store.test_dagster_sqlite_adapter import _check_planned, _evaluation, _event_types, _materialization
from atlasmart_dagster_tests.team_database import scratch_database

DAYS = [f"2026-09-{day}" for day in range(17, 27)]
CHECKS = ("grain_unique", "no_negative_money")


@pytest.fixture
def url():
    with scratch_database("atlasmart_pgadapter") as url:
        yield url


def _rows(url: str) -> dict:
    """What Dagster stored of the run's checks: the executions' (check, partition, status) and the event types."""
    import sqlalchemy as sa

    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg2://"))
    try:
        with engine.connect() as conn:
            executions = sorted(conn.execute(sa.text(
                "SELECT check_name, partition, execution_status, evaluation_event_storage_id IS NOT NULL "
                "FROM asset_check_executions")).all())
            events = conn.execute(sa.text("SELECT dagster_event_type, count(*) FROM event_logs GROUP BY 1")).all()
    finally:
        engine.dispose()
    return {"executions": [tuple(r) for r in executions], "events": dict(events)}


def test_held_evaluations_are_written_in_one_transaction_with_what_dagsters_storage_writes(url):
    plain = PostgresEventLogStorage(url)
    planned = [_check_planned("r1", check, d) for check in CHECKS for d in DAYS]
    evaluations = [_evaluation("r1", check, d, passed=d != DAYS[3]) for check in CHECKS for d in DAYS]
    for event in planned + evaluations:
        plain.store_event(event)
    expected = _rows(url)
    assert len(expected["executions"]) == len(evaluations) and all(r[3] for r in expected["executions"])
    plain.wipe()

    held = BatchingPostgresEventLogStorage(url)
    for event in planned:
        held.store_event(event)
    transactions = []
    store_together = BatchingPostgresEventLogStorage._store_together
    held._store_together = lambda events: (transactions.append(len(events)), store_together(held, events))
    with held.coalescing():
        for event in evaluations:
            held.store_event(event)
        assert transactions == [] and _rows(url)["events"].get("ASSET_CHECK_EVALUATION") is None, "held, not yet written"
    assert transactions == [len(evaluations)], "written once, all together, when the scope ends"
    assert _rows(url) == expected
    statuses = {e.status.value for e in plain.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("fact_sales"), "grain_unique"), limit=100)}
    assert statuses == {"SUCCEEDED", "FAILED"}
    held.dispose()
    plain.dispose()


def test_the_threads_next_access_and_a_failed_transaction_keep_every_evaluation_once_in_order(url, monkeypatch):
    storage = BatchingPostgresEventLogStorage(url)
    for d in DAYS[:3]:
        storage.store_event(_check_planned("r1", "grain_unique", d))
    with storage.coalescing():
        storage.store_event(_evaluation("r1", "grain_unique", DAYS[0]))
        storage.store_event(_materialization("r1", DAYS[1]))  # another kind: the held one is written first
        storage.store_event(_evaluation("r1", "grain_unique", DAYS[1]))
        assert _event_types(storage, "r1")[3:] == [  # a read by the thread sees what it stored
            ("ASSET_CHECK_EVALUATION", DAYS[0]), ("ASSET_MATERIALIZATION", DAYS[1]), ("ASSET_CHECK_EVALUATION", DAYS[1])]

    original = PostgresEventLogStorage.store_asset_check_event
    calls = []

    def fail_inside_the_transaction(self, event, event_id):
        calls.append(event_id)
        if len(calls) == 2 and threading.get_ident() in self._batch_conns:
            raise RuntimeError("connection reset")  # after the first evaluation of the transaction was written
        return original(self, event, event_id)

    monkeypatch.setattr(PostgresEventLogStorage, "store_asset_check_event", fail_inside_the_transaction)
    with storage.coalescing():
        for d in DAYS[2:6]:
            storage.store_event(_evaluation("r1", "grain_unique", d))
    monkeypatch.undo()
    assert len(calls) == 2 + 4, "the transaction failed at its second evaluation, then each was stored alone"
    evaluated = [p for t, p in _event_types(PostgresEventLogStorage(url), "r1") if t == "ASSET_CHECK_EVALUATION"]
    assert evaluated == DAYS[:6], "the failed transaction wrote nothing; each was then stored once, in order"
    storage.dispose()


def test_the_team_instance_config_builds_the_batching_storage_and_its_ref_too(url, tmp_path):
    (tmp_path / "dagster.yaml").write_text(
        "storage:\n  custom:\n    module: atlasmart_dagster.store.instance.dagster_postgres_adapter\n"
        f"    class: BatchingPostgresStorage\n    config:\n      postgres_url: {url}\n"
        "telemetry:\n  enabled: false\n")
    instance = dg.DagsterInstance.from_config(str(tmp_path))
    try:
        assert isinstance(instance.event_log_storage, BatchingPostgresEventLogStorage)
        child = dg.DagsterInstance.from_ref(instance.get_ref())  # what a run worker builds
        assert isinstance(child.event_log_storage, BatchingPostgresEventLogStorage)
        child.dispose()
        instance.report_runless_asset_event(dg.AssetMaterialization("fact_sales", partition=DAYS[0]))
        instance.report_runless_asset_event(dg.AssetMaterialization("fact_sales", partition=DAYS[1]))
        assert PostgresEventLogStorage(url).get_materialized_partitions(dg.AssetKey("fact_sales")) == set(DAYS[:2])
    finally:
        instance.dispose()
