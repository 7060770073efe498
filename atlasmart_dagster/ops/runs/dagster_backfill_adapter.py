"""Queue a Dagster asset backfill from Python: the one place AtlasMart uses Dagster internals.

Dagster 1.13 has no public Python API that launches an asset backfill (the
UI does it through a GraphQL mutation that needs a running webserver); this
builds the backfill with the same internal constructor that mutation uses,
and finds requested backfills by status with the internal status enum.
``atlasmart_dagster_tests/ops/runs/test_dagster_backfill_adapter.py`` reads the
queued backfill back through the instance and fails on an upgrade that
changes what it holds.
"""

from __future__ import annotations

import hashlib
from typing import Mapping, Sequence

import dagster as dg
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.utils import make_new_backfill_id
from dagster._time import get_current_timestamp

from ...product.lanes import LANE_TAG
from .queue import SUBMISSION_TAG


def asset_submission(partitions: Sequence[str], asset_keys: Sequence[dg.AssetKey], lane: str | None) -> str:
    """The ``atlasmart/submission`` value of a backfill of ``asset_keys`` x ``partitions`` in ``lane``."""
    assets = ",".join(sorted(k.to_user_string() for k in asset_keys))
    digest = hashlib.sha256(f"{lane}|{assets}".encode()).hexdigest()[:12]
    return f"assets-{digest}:{partitions[0]}..{partitions[-1]}"


def unfinished_asset_backfill(instance: dg.DagsterInstance, submission: str) -> PartitionBackfill | None:
    """The oldest backfill submitted for ``submission`` that the daemon has not finished (REQUESTED), if any."""
    # By status, then the tag in Python: an instance whose backfill-tags index was never built
    # finds backfills by tag only through their runs, and a backfill left waiting may have none.
    requested = instance.get_backfills(status=BulkActionStatus.REQUESTED)
    matching = [b for b in requested if b.tags.get(SUBMISSION_TAG) == submission]
    return min(matching, key=lambda b: b.backfill_timestamp) if matching else None


def queue_asset_backfill(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    partitions: Sequence[str],
    asset_keys: Sequence[dg.AssetKey],
    tags: Mapping[str, str],
    title: str,
    description: str,
) -> str:
    """Add an asset backfill of ``asset_keys`` x ``partitions`` to the instance (the daemon runs it).

    If an earlier submission of the same assets, days and lane is still
    waiting for the daemon (its command stopped waiting: the daemon stopped,
    Ctrl-C), that backfill's id is returned instead: the same work is never
    queued twice.
    """
    submission = asset_submission(partitions, asset_keys, tags.get(LANE_TAG))
    earlier = unfinished_asset_backfill(instance, submission)
    if earlier is not None:
        return earlier.backfill_id
    backfill_id = make_new_backfill_id()
    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=backfill_id,
        asset_graph=defs.resolve_asset_graph(),
        partition_names=list(partitions),
        asset_selection=list(asset_keys),
        backfill_timestamp=get_current_timestamp(),
        tags={**tags, SUBMISSION_TAG: submission},
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=title,
        description=description,
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill_id
