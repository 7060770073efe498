"""The pooled SQLite storage is Dagster's storage to every other reader (this fails first on an upgrade that changes it)."""

import threading
import time

import dagster as dg
from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from atlasmart_dagster.store.instance.dagster_instance import prepare_dagster_home
from atlasmart_dagster.store.instance.dagster_sqlite_adapter import PooledSqliteEventLogStorage, PooledSqliteStorage
from atlasmart_dagster.store.home import AtlasmartHome


def _materialization(run_id: str, partition: str) -> EventLogEntry:
    event = DagsterEvent(
        DagsterEventType.ASSET_MATERIALIZATION.value,
        "job",
        event_specific_data=StepMaterializationData(dg.AssetMaterialization("fact_sales", partition=partition)),
    )
    return EventLogEntry(error_info=None, level=20, user_message="", run_id=run_id, timestamp=time.time(),
                         dagster_event=event)


def test_the_embedded_instance_uses_the_pooled_storage_in_dagsters_folders(tmp_path, monkeypatch):
    folder = prepare_dagster_home(AtlasmartHome(tmp_path / "home"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # as atlasmart's own commands open it
    instance = dg.DagsterInstance.from_config(str(folder))
    try:
        assert isinstance(instance.event_log_storage, PooledSqliteEventLogStorage)
        instance.report_runless_asset_event(dg.AssetMaterialization("fact_sales", partition="2026-09-17"))
        # Dagster's default layout: a plain SQLite storage on the folder sees the same records.
        assert (folder / "history" / "runs.db").exists() and (folder / "history" / "runs" / "index.db").exists()
        plain = SqliteEventLogStorage(str(folder / "history" / "runs"))
        assert plain.get_materialized_partitions(dg.AssetKey("fact_sales")) == {"2026-09-17"}
    finally:
        instance.dispose()


def test_writes_of_either_storage_are_read_by_the_other(tmp_path):
    pooled = PooledSqliteEventLogStorage(str(tmp_path))
    plain = SqliteEventLogStorage(str(tmp_path))
    pooled.store_event(_materialization("r1", "2026-09-17"))
    plain.store_event(_materialization("r1", "2026-09-18"))
    pooled.store_event(_materialization("r1", "2026-09-19"))
    for storage in (pooled, plain):
        assert len(storage.get_logs_for_run("r1")) == 3
        assert storage.get_materialized_partitions(dg.AssetKey("fact_sales")) == {"2026-09-17", "2026-09-18", "2026-09-19"}
    pooled.dispose()


def test_a_watcher_sees_each_event_as_it_is_written(tmp_path):
    """Dagster's live run view watches the run shard's file; a pooled write must still change it."""
    writer = PooledSqliteEventLogStorage(str(tmp_path))
    writer.store_event(_materialization("r1", "2026-09-17"))  # the shard exists before anyone watches
    watcher = SqliteEventLogStorage(str(tmp_path))
    seen = []
    arrived = threading.Event()

    def on_event(entry, cursor):
        seen.append(entry.dagster_event.partition)
        if len(seen) == 2:
            arrived.set()

    watcher.watch("r1", str(writer.get_records_for_run("r1").cursor), on_event)
    try:
        for day in ("2026-09-18", "2026-09-19"):
            writer.store_event(_materialization("r1", day))
            time.sleep(0.3)
        assert arrived.wait(10), f"the watcher saw {seen}"
        assert seen == ["2026-09-18", "2026-09-19"]
    finally:
        watcher.end_watch("r1", on_event)
        watcher.dispose()
        writer.dispose()


def test_a_shard_deleted_underneath_is_created_again_not_written_into_the_deleted_file(tmp_path):
    pooled = PooledSqliteEventLogStorage(str(tmp_path))
    pooled.store_event(_materialization("r1", "2026-09-17"))
    for suffix in ("", "-wal", "-shm"):
        path = tmp_path / f"r1.db{suffix}"
        if path.exists():
            path.unlink()  # as another process's run deletion would
    pooled.store_event(_materialization("r1", "2026-09-18"))
    fresh = SqliteEventLogStorage(str(tmp_path))
    assert [e.dagster_event.partition for e in fresh.get_logs_for_run("r1")] == ["2026-09-18"]
    pooled.wipe()
    pooled.store_event(_materialization("r1", "2026-09-19"))
    assert [e.dagster_event.partition for e in fresh.get_logs_for_run("r1")] == ["2026-09-19"]
    pooled.dispose()


def test_the_storage_config_round_trips_through_an_instance_ref(tmp_path):
    """A run worker rebuilds the instance from its ref: it must get the pooled storage on the same folder."""
    folder = prepare_dagster_home(AtlasmartHome(tmp_path / "home"))
    instance = dg.DagsterInstance.from_config(str(folder))
    try:
        ref = instance.get_ref()
        assert ref.storage_data.class_name == PooledSqliteStorage.__name__
        rebuilt = dg.DagsterInstance.from_ref(ref)
        assert isinstance(rebuilt.event_log_storage, PooledSqliteEventLogStorage)
        assert rebuilt.event_log_storage.path_for_shard("index") == str(folder / "history" / "runs" / "index.db")
        rebuilt.dispose()
    finally:
        instance.dispose()


def test_a_batch_is_stored_whole_in_one_transaction_and_read_by_dagsters_own_storage(tmp_path):
    pooled = PooledSqliteEventLogStorage(str(tmp_path))
    days = [f"2026-09-{day}" for day in range(17, 27)]
    pooled.store_event_batch([_materialization("r1", day) for day in days])
    plain = SqliteEventLogStorage(str(tmp_path))
    for storage in (pooled, plain):
        assert len(storage.get_logs_for_run("r1")) == len(days)
        assert storage.get_materialized_partitions(dg.AssetKey("fact_sales")) == set(days)
    pooled.store_event(_materialization("r1", "2026-09-30"))  # connections are usable after a batch
    assert len(plain.get_logs_for_run("r1")) == len(days) + 1
    pooled.dispose()


def _planned(run_id: str, asset: str, partition: str) -> EventLogEntry:
    from dagster._core.events import AssetMaterializationPlannedData

    event = DagsterEvent(
        DagsterEventType.ASSET_MATERIALIZATION_PLANNED.value, "job",
        event_specific_data=AssetMaterializationPlannedData(dg.AssetKey(asset), partition=partition),
    )
    return EventLogEntry(error_info=None, level=20, user_message="", run_id=run_id, timestamp=time.time(),
                         dagster_event=event)


def _observation(run_id: str, asset: str, partition: str) -> EventLogEntry:
    from dagster._core.events import AssetObservationData

    event = DagsterEvent(
        DagsterEventType.ASSET_OBSERVATION.value, "job",
        event_specific_data=AssetObservationData(dg.AssetObservation(asset, partition=partition)),
    )
    return EventLogEntry(error_info=None, level=20, user_message="", run_id=run_id, timestamp=time.time(),
                         dagster_event=event)


def _tagged(run_id: str, partition: str) -> EventLogEntry:
    """A materialization carrying a tag Dagster indexes (its data version) and one it does not."""
    event = DagsterEvent(
        DagsterEventType.ASSET_MATERIALIZATION.value, "job",
        event_specific_data=StepMaterializationData(dg.AssetMaterialization(
            "agg_daily_sales", partition=partition, tags={"dagster/data_version": "v7", "team": "finance"})),
    )
    return EventLogEntry(error_info=None, level=20, user_message="", run_id=run_id, timestamp=time.time(),
                         dagster_event=event)


# Columns that record when a row (or a store) was written, which two stores written one after the other cannot share.
_WRITE_TIME_COLUMNS = {"create_timestamp", "update_timestamp", "migration_completed"}


def _tables(folder) -> dict:
    """Every row of every table of every shard in ``folder`` (by shard file, then table), as stored."""
    import sqlite3

    shards = {}
    for path in sorted(folder.glob("*.db")):
        con = sqlite3.connect(path)
        try:
            con.row_factory = sqlite3.Row
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            shards[path.name] = {
                name: [{k: row[k] for k in row.keys() if k not in _WRITE_TIME_COLUMNS}
                       for row in con.execute(f'SELECT * FROM "{name}" ORDER BY rowid')]
                for name in names if name != "alembic_version"
            }
        finally:
            con.close()
    return shards


def test_a_batch_stores_exactly_what_one_by_one_writes_store(tmp_path):
    """Every table of every shard, row by row: the bulk asset events and the asset rows written once per key.

    Mixed kinds in one batch: planned events (stored one by one), then
    materializations and observations (in bulk), in three runs; a planned
    event after a key's newest materialization (it moves the run, never the
    materialization); a materialization with an indexed tag.
    """
    days = [f"2026-09-{day}" for day in range(17, 22)]
    events = [_planned("r1", "fact_sales", d) for d in days]
    events += [_materialization("r1", d) for d in days]
    events += [_tagged("r1", days[0]), _observation("r1", "fact_sales", days[1])]
    events += [_planned("r2", "fact_sales", "2026-09-30"), _planned("r2", "agg_daily_sales", "2026-09-30")]
    events += [_materialization("r2", "2026-09-22"), _tagged("r3", "2026-09-23"),
               _planned("r3", "agg_daily_sales", "2026-10-01"), _planned("r3", "fact_sales", "2026-10-01")]
    one_by_one = PooledSqliteEventLogStorage(str(tmp_path / "a"))
    batched = PooledSqliteEventLogStorage(str(tmp_path / "b"))
    for event in events:
        one_by_one.store_event(event)
    batched.store_event_batch(events)
    expected = _tables(tmp_path / "a")
    index = expected["index.db"]
    assert len(index["event_logs"]) == len(events) and {"r1.db", "r2.db", "r3.db"} <= set(expected)
    assert [(t["key"], t["value"]) for t in index["asset_event_tags"]] == [("dagster/data_version", "v7")] * 2
    keys = {row["asset_key"]: row for row in index["asset_keys"]}
    assert '"2026-09-22"' in keys['["fact_sales"]']["last_materialization"]
    assert keys['["fact_sales"]']["last_run_id"] == keys['["agg_daily_sales"]']["last_run_id"] == "r3"
    assert _tables(tmp_path / "b") == expected
    # and Dagster's own storage reads the same newest materialization from it
    newest = SqliteEventLogStorage(str(tmp_path / "b")).get_asset_records([dg.AssetKey("fact_sales")])[0]
    assert newest.asset_entry.last_materialization_record.asset_materialization.partition == "2026-09-22"
    one_by_one.dispose()
    batched.dispose()


def test_a_batch_that_fails_part_way_stores_none_of_itself(tmp_path, monkeypatch):
    pooled = PooledSqliteEventLogStorage(str(tmp_path))
    events = [_materialization("r1", f"2026-09-{day}") for day in range(17, 22)]
    stored = []

    def failing_after_the_rows(self, conn, events, event_ids):
        # the event rows of both shards are written by now (bulk or one by one): the failure comes after them
        stored.extend(events)
        raise RuntimeError("disk full")

    monkeypatch.setattr(PooledSqliteEventLogStorage, "_store_asset_event_tags", failing_after_the_rows)
    try:
        pooled.store_event_batch(events)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the batch should have failed")
    monkeypatch.undo()
    plain = SqliteEventLogStorage(str(tmp_path))
    assert plain.get_logs_for_run("r1") == []
    assert plain.get_materialized_partitions(dg.AssetKey("fact_sales")) == set()
    # Dagster's fallback then stores them one by one, once each.
    for event in events:
        pooled.store_event(event)
    assert len(plain.get_logs_for_run("r1")) == len(events)
    pooled.dispose()


def test_the_code_location_turns_event_batching_on_by_default():
    import os

    import atlasmart_dagster.definitions  # noqa: F401  (sets the default on import)

    assert int(os.environ["DAGSTER_EVENT_BATCH_SIZE"]) > 0


def _check_planned(run_id: str, check: str, partition: str) -> EventLogEntry:
    from dagster._core.definitions.asset_checks.asset_check_evaluation import AssetCheckEvaluationPlanned
    from dagster._core.definitions.partitions.subset import DefaultPartitionsSubset

    event = DagsterEvent(
        DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED.value, "job",
        event_specific_data=AssetCheckEvaluationPlanned(
            asset_key=dg.AssetKey("fact_sales"), check_name=check,
            partitions_subset=DefaultPartitionsSubset({partition})),
    )
    return EventLogEntry(error_info=None, level=20, user_message="", run_id=run_id, timestamp=time.time(),
                         dagster_event=event)


def _evaluation(run_id: str, check: str, partition: str, passed: bool = True) -> EventLogEntry:
    event = DagsterEvent(
        DagsterEventType.ASSET_CHECK_EVALUATION.value, "job",
        event_specific_data=dg.AssetCheckEvaluation(
            asset_key=dg.AssetKey("fact_sales"), check_name=check, passed=passed, partition=partition),
    )
    return EventLogEntry(error_info=None, level=20, user_message="", run_id=run_id, timestamp=time.time(),
                         dagster_event=event)


def _event_types(storage, run_id: str) -> list[tuple[str, str | None]]:
    """(event type, partition) of the run's events in the order they were stored."""
    def partition(data):
        return getattr(getattr(data, "materialization", data), "partition", None)

    return [(e.dagster_event_type.value, partition(e.dagster_event.event_specific_data))
            for e in storage.get_logs_for_run(run_id)]


def test_check_evaluations_held_in_a_scope_are_stored_as_one_batch_exactly_as_one_by_one(tmp_path, monkeypatch):
    days = [f"2026-09-{day}" for day in range(17, 27)]
    planned = [_check_planned("r1", check, d) for check in ("grain_unique", "no_negative_money") for d in days]
    evaluations = [_evaluation("r1", check, d, passed=d != days[3])
                   for check in ("grain_unique", "no_negative_money") for d in days]
    one_by_one = PooledSqliteEventLogStorage(str(tmp_path / "a"))
    held = PooledSqliteEventLogStorage(str(tmp_path / "b"))
    for storage in (one_by_one, held):
        storage.store_event_batch(planned)
    for event in evaluations:
        one_by_one.store_event(event)
    batches = []
    store_batch = PooledSqliteEventLogStorage.store_event_batch
    monkeypatch.setattr(PooledSqliteEventLogStorage, "store_event_batch",
                        lambda self, events: (batches.append(len(events)), store_batch(self, events)))
    plain = SqliteEventLogStorage(str(tmp_path / "b"))
    with held.coalescing():
        for event in evaluations:
            held.store_event(event)
        assert batches == [] and len(plain.get_logs_for_run("r1")) == len(planned), "held, not yet written"
    assert batches == [len(evaluations)], "written once, all together, when the scope ends"
    assert _tables(tmp_path / "b") == _tables(tmp_path / "a")
    executions = plain.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("fact_sales"), "grain_unique"), limit=100)
    assert len(executions) == len(days)
    assert {e.status.value for e in executions} == {"SUCCEEDED", "FAILED"}
    one_by_one.dispose()
    held.dispose()


def test_anything_else_the_thread_stores_or_reads_comes_after_the_held_evaluations(tmp_path):
    storage = PooledSqliteEventLogStorage(str(tmp_path))
    days = ["2026-09-17", "2026-09-18", "2026-09-19"]
    storage.store_event_batch([_check_planned("r1", "grain_unique", d) for d in days])
    with storage.coalescing():
        storage.store_event(_evaluation("r1", "grain_unique", days[0]))
        storage.store_event(_evaluation("r1", "grain_unique", days[1]))
        storage.store_event(_materialization("r1", days[2]))  # another kind of event: the held ones go first
        storage.store_event(_evaluation("r1", "grain_unique", days[2]))
        # a read by the same thread sees everything it stored, in the order it stored it
        assert _event_types(storage, "r1")[len(days):] == [
            ("ASSET_CHECK_EVALUATION", days[0]), ("ASSET_CHECK_EVALUATION", days[1]),
            ("ASSET_MATERIALIZATION", days[2]), ("ASSET_CHECK_EVALUATION", days[2]),
        ]
        storage.store_event(_evaluation("r1", "grain_unique", "2026-09-20"))
    assert _event_types(SqliteEventLogStorage(str(tmp_path)), "r1")[-1] == ("ASSET_CHECK_EVALUATION", "2026-09-20")
    storage.dispose()


def test_held_evaluations_whose_batch_fails_are_stored_one_by_one_once_each(tmp_path, monkeypatch):
    storage = PooledSqliteEventLogStorage(str(tmp_path))
    days = [f"2026-09-{day}" for day in range(17, 22)]
    storage.store_event_batch([_check_planned("r1", "grain_unique", d) for d in days])

    def failing(self, events):
        raise RuntimeError("database is locked")

    monkeypatch.setattr(PooledSqliteEventLogStorage, "store_event_batch", failing)
    with storage.coalescing():
        for d in days:
            storage.store_event(_evaluation("r1", "grain_unique", d))
    monkeypatch.undo()
    plain = SqliteEventLogStorage(str(tmp_path))
    assert [p for t, p in _event_types(plain, "r1") if t == "ASSET_CHECK_EVALUATION"] == days
    storage.dispose()


def test_other_threads_and_other_instances_store_their_evaluations_at_once(tmp_path):
    from atlasmart_dagster.store.instance.held_check_evaluations import coalesced_check_evaluations

    storage = PooledSqliteEventLogStorage(str(tmp_path))
    storage.store_event(_check_planned("r1", "grain_unique", "2026-09-17"))
    with storage.coalescing():
        worker = threading.Thread(target=storage.store_event, args=(_evaluation("r1", "grain_unique", "2026-09-17"),))
        worker.start()
        worker.join()
        assert _event_types(SqliteEventLogStorage(str(tmp_path)), "r1")[-1] == ("ASSET_CHECK_EVALUATION", "2026-09-17")
    with dg.instance_for_test() as instance, coalesced_check_evaluations(instance):  # not the pooled log: no effect
        assert not isinstance(instance.event_log_storage, PooledSqliteEventLogStorage)
    storage.dispose()


def test_a_scope_ended_on_another_thread_still_writes_what_it_held(tmp_path):
    """A step's generator closed by the garbage collector ends its scope on whichever thread collects it."""
    storage = PooledSqliteEventLogStorage(str(tmp_path))
    storage.store_event(_check_planned("r1", "grain_unique", "2026-09-17"))

    def step():
        with storage.coalescing():
            yield
            storage.store_event(_evaluation("r1", "grain_unique", "2026-09-17"))
            yield

    generator = step()
    next(generator)
    next(generator)  # the evaluation is held
    closer = threading.Thread(target=generator.close)
    closer.start()
    closer.join()
    assert _event_types(SqliteEventLogStorage(str(tmp_path)), "r1")[-1] == ("ASSET_CHECK_EVALUATION", "2026-09-17")
    storage.dispose()
