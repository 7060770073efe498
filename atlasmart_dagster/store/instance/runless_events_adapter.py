"""Many runless asset materializations stored as one batch: what certifying a year reports to the UI.

``DagsterInstance.report_runless_asset_event`` stores one event per call,
one transaction (and, on the embedded instance, one fsync) each. Certifying a
365-day run reports a served materialization for every product and day
(1,095 events), and one call per event was half of ``atlasmart certify`` for
the year (8.9 s of 21 s under cProfile).

``report_runless_materializations`` builds the same event log entries that
``report_runless_asset_event`` builds (Dagster's runless run id and job name,
a ``StepMaterializationData`` payload, the same level and timestamp) and hands
them to the event log's ``store_event_batch``, the call Dagster itself makes
with a step's batched materializations (``DAGSTER_EVENT_BATCH_SIZE``): one
transaction per shard on the embedded instance
(``dagster_sqlite_adapter.py``), one statement on Postgres. If a batch fails,
its events are stored one by one, as Dagster's own batching does. Nothing
else ``handle_new_event`` does applies to runless asset events (run-status
bookkeeping is for run events; nobody subscribes to the runless run id).

Private Dagster names are imported here only;
``atlasmart_dagster_tests/store/test_runless_events_adapter.py`` checks that a
batch reads back exactly as events reported one by one do.
"""

from __future__ import annotations

import logging
import sys
from typing import Sequence

import dagster as dg
from dagster._core.events import StepMaterializationData
from dagster._core.instance.utils import RUNLESS_JOB_NAME, RUNLESS_RUN_ID
from dagster._time import get_current_timestamp

# Events per store_event_batch call (one transaction each): bounded so one call never holds
# the embedded event log's lock for long.
BATCH = 500


def _entry(materialization: dg.AssetMaterialization) -> dg.EventLogEntry:
    event = dg.DagsterEvent(
        event_type_value=dg.DagsterEventType.ASSET_MATERIALIZATION.value,
        job_name=RUNLESS_JOB_NAME,
        event_specific_data=StepMaterializationData(materialization),
    )
    return dg.EventLogEntry(
        user_message="",
        level=logging.INFO,
        job_name=RUNLESS_JOB_NAME,
        run_id=RUNLESS_RUN_ID,
        error_info=None,
        timestamp=get_current_timestamp(),
        step_key=None,
        dagster_event=event,
    )


def report_runless_materializations(
    instance: dg.DagsterInstance, materializations: Sequence[dg.AssetMaterialization]
) -> None:
    """Store ``materializations`` as runless events, in order, a batch of up to ``BATCH`` per transaction."""
    if len(materializations) == 1:
        instance.report_runless_asset_event(materializations[0])
        return
    storage = instance.event_log_storage
    for start in range(0, len(materializations), BATCH):
        entries = [_entry(m) for m in materializations[start:start + BATCH]]
        try:
            storage.store_event_batch(entries)
        except Exception as exc:  # as Dagster's handle_new_event: fall back to one event at a time
            sys.stderr.write(f"Exception while storing event batch: {exc}\nFalling back to single events...\n")
            for entry in entries:
                storage.store_event(entry)
