"""One row per decision: a served asset's check gets a new evaluation only when it says something new.

Several paths report the same decision (the command that made it, the
certification sensor's next tick, the incident workflow), in one process or
in two at once (a command beside the daemon). Each report asks the instance
what the check says now, its newest evaluation, and writes only when that
differs. Two things make that exact:

* the question and the write are one step under the ledger's write lock
  (``report_unless_said``): two processes reporting one decision at the same
  moment cannot both find it unsaid;
* an evaluation executed in a run (*Execute all*, or the checks selected with
  a partition) counts as said while it still reads against the served asset's
  newest materialization, as the UI judges it (``still_current``); once a newer
  served day makes it read "Not Evaluated", the same words are said again.

Every runless evaluation names the served materialization it judges
(``target_materialization_data``, ``judging``): a served day is recorded in
the run that built it, and Dagster would otherwise judge a runless
evaluation against it by "created after it" at one-second resolution, which
one reported in the same second misses (*Not Evaluated*). A newer served
materialization makes the check's newest row not current, so the next report
writes it again, naming the new one.
"""

from __future__ import annotations

from typing import Callable

import dagster as dg

from ...store.platform import Platform
from ..dagster_event_adapter import judging


def still_current(instance: dg.DagsterInstance, record) -> bool:
    """Whether a check record reads against its asset's newest materialization (what the UI shows as current).

    Dagster 1.13's rule (``AssetCheckExecutionRecord.targets_latest_materialization``):
    the same run as that materialization (every runless event shares the
    empty run id), the materialization it names, or else one older than
    the evaluation.
    """
    key = record.key.asset_key
    partitions = [record.partition] if record.partition else None
    newest = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key, asset_partitions=partitions),
                                             limit=1).records
    if not newest or newest[0].run_id == record.run_id:
        return True
    evaluation = record.event.dagster_event.asset_check_evaluation_data
    target = evaluation.target_materialization_data
    if target is not None:
        return target.storage_id == newest[0].storage_id
    return newest[0].timestamp < record.create_timestamp


def what_it_says_now(instance: dg.DagsterInstance, key: dg.AssetCheckKey) -> dg.AssetCheckEvaluation | None:
    """The check's newest execution, if it is an evaluation that still reads as current; else None."""
    record = instance.get_latest_asset_check_evaluation_record(key)
    if record is None or record.event is None or record.event.dagster_event is None:
        return None
    if record.event.dagster_event.event_type != dg.DagsterEventType.ASSET_CHECK_EVALUATION:
        return None  # only planned (a run in progress, or one that ended without it): nothing said
    if not still_current(instance, record):
        return None
    return record.event.dagster_event.asset_check_evaluation_data


def report_unless_said(
    instance: dg.DagsterInstance,
    platform: Platform,
    evaluation: dg.AssetCheckEvaluation,
    says_same: Callable[[dg.AssetCheckEvaluation, dg.AssetCheckEvaluation], bool],
) -> bool:
    """Report ``evaluation`` (runless, naming the materialization it judges) unless the check already says the
    same now; True if it was written."""
    with platform.ledger.engine.transaction():  # the write lock every ledger writer takes, across processes
        said = what_it_says_now(instance, evaluation.asset_check_key)
        if said is not None and says_same(said, evaluation):
            return False
        instance.report_runless_asset_event(judging(instance, evaluation))
        return True
