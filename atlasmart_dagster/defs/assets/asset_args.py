"""The decorator arguments every table asset shares, derived from its spec in the table registry.

A table's layer is its Dagster group; every day-partitioned table carries the
``atlasmart/chain=daily`` tag, which is how the daily jobs select the chain
(``defs/automation/jobs.py``): a new mart made with these arguments is in them
without another list to edit. Partitioning, backfill policy and retries are
the same for every layer of the chain, so they are written once here.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from ...store.tables import TableSpec
from ..lineage import lineage_metadata
from ..partitions import BACKFILL_POLICY, daily_partitions
from ..retries import STORAGE_RETRY_POLICY

CHAIN_TAG = "atlasmart/chain"
DAILY = "daily"

# Every layer of the daily chain: one partition per business day, a range as one
# set-based run, storage faults retried (defs/retries.py).
DAILY_ASSET_ARGS: dict[str, Any] = {
    "partitions_def": daily_partitions,
    "backfill_policy": BACKFILL_POLICY,
    "retry_policy": STORAGE_RETRY_POLICY,
}


def table_asset_args(
    table: TableSpec,
    *,
    deps: list[str],
    owners: list[str],
    metadata: dict[str, Any] | None = None,
    lineage: dict[str, list[tuple[str, str]]] | None = None,
) -> dict[str, Any]:
    """What an ``AssetSpec`` (or ``@asset``) of ``table`` says about it: group, kinds, owners, lineage, chain tag.

    ``lineage`` is the column lineage of a table that ``defs/lineage.py`` does
    not declare (a new mart may declare its own beside its asset); one of the
    two must give it, so the blast radius of a source field reaches the table.
    """
    return {
        "deps": deps,
        "group_name": table.layer,
        "kinds": {"iceberg", "duckdb"},
        "owners": owners,
        "metadata": {**lineage_metadata(table.name, lineage), **(metadata or {})},
        "tags": {CHAIN_TAG: DAILY} if table.daily else {},
    }


def blocking_check(name: str, table: TableSpec, description: str, **extra: Any) -> dg.AssetCheckSpec:
    """An in-step check of ``table`` that blocks everything downstream when it fails, reported per day."""
    return dg.AssetCheckSpec(
        name, asset=table.name, blocking=True, partitions_def=daily_partitions, description=description, **extra
    )
