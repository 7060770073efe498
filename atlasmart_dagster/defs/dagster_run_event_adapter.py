"""Adapter over Dagster's event log: record an asset materialization in a run that has ended.

Dagster 1.13's public API records an asset event either from inside a running
step (``context.log_event``) or without a run
(``DagsterInstance.report_runless_asset_event``). A runless event's run id is
empty, and the UI's day page (an asset's *Partitions* tab) then reads "Run
None" and "Job None" in its header: it shows the run and job of the newest
materialization's run, and there is none.

A served day has a run that is true to name: the run that built the version
consumers are served (the certification's ``run_id``). Certification happens
after that run ended, never inside it, so no step of it can log the event.
This adapter writes the materialization into that run's event log, as
``report_runless_asset_event`` does for the empty run id (the same
``DagsterEvent`` and ``StepMaterializationData``, with the run's id and job):
the day's page then names the run, its status and its job, and the run's log
shows when what it built was served. It uses one internal, the payload class
``StepMaterializationData``; ``report_dagster_event`` is the instance's own
method that ``report_runless_asset_event`` calls.
``atlasmart_dagster_tests/defs/test_dagster_run_event_adapter.py`` fails when
an upgrade changes either.
"""

from __future__ import annotations

import dagster as dg
from dagster._core.events import StepMaterializationData


def report_materialization_in_run(
    instance: dg.DagsterInstance, run: dg.DagsterRun, materialization: dg.AssetMaterialization
) -> None:
    """Record ``materialization`` in ``run``'s event log (the run may have ended), at the current time."""
    event = dg.DagsterEvent(
        event_type_value=dg.DagsterEventType.ASSET_MATERIALIZATION.value,
        job_name=run.job_name,
        event_specific_data=StepMaterializationData(materialization),
    )
    instance.report_dagster_event(event, run_id=run.run_id)
