"""Queue a Dagster asset backfill from Python: the one place AtlasMart uses Dagster internals.

Dagster 1.13 has no public Python API that launches an asset backfill (the
UI does it through a GraphQL mutation that needs a running webserver); this
builds the backfill with the same internal constructor that mutation uses.
``atlasmart_dagster_tests/ops/test_dagster_backfill_adapter.py`` reads the
queued backfill back through the instance and fails on an upgrade that
changes what it holds.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import dagster as dg
from dagster._core.execution.backfill import PartitionBackfill
from dagster._core.utils import make_new_backfill_id
from dagster._time import get_current_timestamp


def queue_asset_backfill(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    partitions: Sequence[str],
    asset_keys: Sequence[dg.AssetKey],
    tags: Mapping[str, str],
    title: str,
    description: str,
) -> str:
    """Add an asset backfill of ``asset_keys`` x ``partitions`` to the instance (the daemon runs it)."""
    backfill_id = make_new_backfill_id()
    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=backfill_id,
        asset_graph=defs.resolve_asset_graph(),
        partition_names=list(partitions),
        asset_selection=list(asset_keys),
        backfill_timestamp=get_current_timestamp(),
        tags=dict(tags),
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=title,
        description=description,
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill_id
