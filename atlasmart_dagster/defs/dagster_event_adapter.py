"""Adapter over Dagster's event log: a served day recorded in the run that built it, and the checks that judge it.

Dagster 1.13's public API records an asset event either from inside a running
step (``context.log_event``) or without a run
(``DagsterInstance.report_runless_asset_event``). A runless event's run id is
empty, and the UI's day page (an asset's *Partitions* tab) then reads "Run
None" and "Job None" in its header: it shows the run and job of the newest
materialization's run. A served day has a run that is true to name, the one
that built the version consumers are served (the certification's
``run_id``); certification happens after that run ended, so no step of it can
log the event. ``report_materialization_in_run`` writes the materialization
into that run's event log as ``report_runless_asset_event`` does for the
empty run id (the same ``DagsterEvent`` and ``StepMaterializationData``, with
the run's id and job).

The served assets' checks are reported runless. Dagster judges a runless
evaluation current against a materialization of the same (empty) run id;
against one recorded in a run, only by the materialization the evaluation
names (``target_materialization_data``), else by "created after it" at the
check table's one-second resolution, which an evaluation reported in the same
second misses. ``judging`` names the materialization an evaluation judges:
the asset's newest (the day's, for an evaluation of one partition), as a step
of a run names it.

``report_materializations`` records many such materializations (in their
runs, or runless) as one batch of the event log: certifying a year serves
1,095 days, and one ``report_dagster_event`` each (its own transactions,
commit and checkpoint) was most of ``atlasmart certify``. The batch is
Dagster's own ``store_event_batch`` on the instance's event log: one
transaction per shard on the embedded pooled SQLite storage, one ``INSERT``
on Postgres.

A check's *Partitions* tab (the UI's ``AssetCheckPartitionHealthQuery``,
``partitionStatuses``) is stricter than the *Checks* tab: it counts a day only when the
day's newest evaluation names, by storage id, the day's newest
materialization (``AssetCheckPartitionInfo.is_current``, read from the
``materialization_event_storage_id`` Dagster stores from
``target_materialization_data``); a per-day evaluation a step yields itself
names none unless it is set, and every day read *Missing*. ``judging_each``
names it for each evaluation of a step, one query per asset.

Internals used: the payload class ``StepMaterializationData``, the runless
run id and job name (``RUNLESS_RUN_ID``, ``RUNLESS_JOB_NAME``), and
``AssetCheckEvaluationTargetMaterializationData`` (the type of the public
``AssetCheckEvaluation.target_materialization_data`` field, not exported).
``atlasmart_dagster_tests/defs/test_dagster_event_adapter.py`` fails when an
upgrade changes either, or what the UI makes of them.
"""

from __future__ import annotations

import logging
import time
from typing import Sequence

import dagster as dg
from dagster import EventLogEntry
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)
from dagster._core.events import StepMaterializationData
from dagster._core.instance.utils import RUNLESS_JOB_NAME, RUNLESS_RUN_ID

# Events stored per batch: bounded, so one batch's statement and transaction stay small.
_BATCH = 500


def report_materialization_in_run(
    instance: dg.DagsterInstance, run: dg.DagsterRun, materialization: dg.AssetMaterialization
) -> None:
    """Record ``materialization`` in ``run``'s event log (the run may have ended), at the current time."""
    report_materializations(instance, [(run, materialization)])


def report_materializations(
    instance: dg.DagsterInstance, reports: Sequence[tuple[dg.DagsterRun | None, dg.AssetMaterialization]]
) -> None:
    """Record each materialization in its run (runless where the run is None), in batches of the event log.

    What a reader sees is what ``report_materialization_in_run`` and
    ``report_runless_asset_event`` record one at a time; only the writes are
    grouped. A batch is stored whole or not at all on the embedded storage;
    the caller's sync is idempotent, so a crash between batches is mended by
    the next one.
    """
    now = time.time()
    entries = [
        EventLogEntry(
            user_message="",
            level=logging.INFO,
            job_name=run.job_name if run is not None else RUNLESS_JOB_NAME,
            run_id=run.run_id if run is not None else RUNLESS_RUN_ID,
            error_info=None,
            timestamp=now,
            step_key=None,
            dagster_event=dg.DagsterEvent(
                event_type_value=dg.DagsterEventType.ASSET_MATERIALIZATION.value,
                job_name=run.job_name if run is not None else RUNLESS_JOB_NAME,
                event_specific_data=StepMaterializationData(materialization),
            ),
        )
        for run, materialization in reports
    ]
    storage = instance.event_log_storage
    for start in range(0, len(entries), _BATCH):
        batch = entries[start:start + _BATCH]
        if len(batch) == 1:
            storage.store_event(batch[0])
        else:
            storage.store_event_batch(batch)


def newest_materializations(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, partitions
) -> dict[str, dg.EventLogRecord]:
    """The newest materialization record of each of ``partitions`` that has one (a few queries, not one a day)."""
    wanted = sorted(set(partitions))
    newest: dict[str, dg.EventLogRecord] = {}
    if wanted:
        # Newest first: each day's first record is its newest (a run's own days are the newest there are).
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=wanted), limit=4 * len(wanted)
        ).records
        for record in records:
            newest.setdefault(record.partition_key, record)
    for partition in wanted:
        if partition not in newest:  # older than the records read above, or never materialized
            record = newest_materialization(instance, asset_key, partition)
            if record is not None:
                newest[partition] = record
    return newest


def report_evaluation_in_run(
    instance: dg.DagsterInstance, materialization: dg.EventLogRecord, evaluation: dg.AssetCheckEvaluation
) -> None:
    """Record ``evaluation`` of the day ``materialization`` is of, in the run that recorded it, naming it.

    Dagster keeps one execution row per check, run and day: a second
    evaluation of the same day in the same run replaces the row (the event
    log keeps both). A runless one could be written once per day only (the
    index's empty run id), so a day whose verdict is to be counted in the
    check's *Partitions* tab is recorded in the run of the served version it
    judges, where its served materialization is.
    """
    entry = materialization.event_log_entry
    judged = _naming(dg.AssetCheckEvaluation(
        asset_key=evaluation.asset_key, check_name=evaluation.check_name, passed=evaluation.passed,
        metadata=evaluation.metadata, severity=evaluation.severity, description=evaluation.description,
        blocking=evaluation.blocking, partition=materialization.partition_key,
    ), materialization)
    event = dg.DagsterEvent(
        event_type_value=dg.DagsterEventType.ASSET_CHECK_EVALUATION.value,
        job_name=entry.job_name,
        event_specific_data=judged,
    )
    instance.report_dagster_event(event, run_id=entry.run_id)


def newest_materialization(instance: dg.DagsterInstance, asset_key: dg.AssetKey, partition: str | None = None):
    """The newest materialization record of the asset (of ``partition``, if given), or None."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[partition] if partition else None), limit=1
    ).records
    return records[0] if records else None


def judging_each(
    instance: dg.DagsterInstance, evaluations: list[dg.AssetCheckEvaluation]
) -> list[dg.AssetCheckEvaluation]:
    """Each of ``evaluations`` naming the materialization it judges (``judging``), read once per asset."""
    newest: dict[tuple[dg.AssetKey, str | None], object] = {}
    by_asset: dict[dg.AssetKey, set[str]] = {}
    for evaluation in evaluations:
        if evaluation.partition is not None:
            by_asset.setdefault(evaluation.asset_key, set()).add(evaluation.partition)
    for asset_key, partitions in by_asset.items():
        found = newest_materializations(instance, asset_key, partitions)
        for partition in partitions:  # a day never materialized is known to have none: not asked again below
            newest[(asset_key, partition)] = found.get(partition)
    judged = []
    for evaluation in evaluations:
        key = (evaluation.asset_key, evaluation.partition)
        if key not in newest:
            newest[key] = newest_materialization(instance, evaluation.asset_key, evaluation.partition)
        judged.append(_naming(evaluation, newest[key]))
    return judged


def judging(instance: dg.DagsterInstance, evaluation: dg.AssetCheckEvaluation) -> dg.AssetCheckEvaluation:
    """``evaluation`` naming the materialization it judges: its asset's newest now (None: nothing materialized)."""
    return _naming(evaluation, newest_materialization(instance, evaluation.asset_key, evaluation.partition))


def _naming(evaluation: dg.AssetCheckEvaluation, record) -> dg.AssetCheckEvaluation:
    """``evaluation`` naming the materialization ``record`` as the one it judges (None: as it is)."""
    if record is None:
        return evaluation
    target = AssetCheckEvaluationTargetMaterializationData(
        storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp
    )
    return dg.AssetCheckEvaluation(
        asset_key=evaluation.asset_key,
        check_name=evaluation.check_name,
        passed=evaluation.passed,
        metadata=evaluation.metadata,
        target_materialization_data=target,
        severity=evaluation.severity,
        description=evaluation.description,
        blocking=evaluation.blocking,
        partition=evaluation.partition,
    )
