"""Partition rollback: serve a certified table's previous certified version of one day.

Only the certified tables and the builds a certification pins can be rolled
back (``ROLLBACK_ASSETS``): maintenance keeps exactly those snapshots, so the
version to roll back to is still there.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from ...store.platform import Platform
from ...store.tables import (
    CERTIFIED_ASSETS,
    REGISTRY,
    TABLES_BY_NAME,
)
from .backup import RecoveryError
from .verify import missing_files, read_failure

# Tables a partition can be rolled back: the certified ones, and the builds a
# certification pins (maintenance keeps exactly those snapshots, so the
# version to roll back to is still there).
ROLLBACK_ASSETS = REGISTRY.names(lambda s: s.certified or s.pinned)


def _is_day(text: str) -> bool:
    """``YYYY-MM-DD`` and a real date (``fromisoformat`` alone also takes ``20260920``)."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _validate_rollback_target(asset: str, partition: str) -> None:
    if asset not in TABLES_BY_NAME:
        raise RecoveryError(f"unknown asset {asset!r}: roll back one of {', '.join(ROLLBACK_ASSETS)}")
    if asset not in ROLLBACK_ASSETS:
        raise RecoveryError(f"cannot roll back {asset}: no certification pins its versions; roll back one of "
                            f"{', '.join(ROLLBACK_ASSETS)}")
    if not _is_day(partition):
        raise RecoveryError(f"partition must be a day like 2026-09-20, not {partition!r}")


def rollback_partition(platform: Platform, asset: str, partition: str, actor: str, reason: str) -> dict[str, Any]:
    """Put one partition of one table back to the version its last certification was built on.

    Iceberg rollback moves a whole table; for one day we write the rows of
    that day as they were at the pinned snapshot as a new snapshot (copy
    forward). Other days are untouched. ``asset`` is one of
    ``ROLLBACK_ASSETS``; a version that can no longer be read is refused,
    never written back as an empty day.
    """
    _validate_rollback_target(asset, partition)
    spec = TABLES_BY_NAME[asset]
    pinned = _pinned_snapshot(platform, asset, partition)
    if pinned is None:
        raise RecoveryError(f"{asset} {partition} has no certified version to roll back to")
    table = platform.warehouse.existing(spec)
    if table is None or table.snapshot_by_id(pinned) is None:
        raise RecoveryError(f"{asset} {partition}: the certified version (snapshot {pinned}) is no longer in the "
                            f"table; restore a backup instead")
    try:
        missing = missing_files(platform.warehouse, spec, partition, pinned)
        if missing:
            raise RecoveryError(f"{asset} {partition}: the certified version is unreadable, files missing "
                                f"({', '.join(missing)}); restore a backup instead")
        rows = platform.warehouse.read(spec, [partition], pinned)
    except RecoveryError:
        raise
    except Exception as exc:
        raise RecoveryError(f"{asset} {partition}: the certified version is {read_failure(exc)[1]}") from exc
    snapshot_id = platform.warehouse.overwrite(
        spec, rows, [partition], {"run_id": f"rollback:{actor}", "rolled_back_to": str(pinned), "reason": reason}
    )
    platform.ledger.partitions.append(asset, partition, "ROLLED_BACK", platform.clock.now(), actor=actor,
                                 snapshot_id=snapshot_id, reason=reason, detail={"to_snapshot_id": pinned,
                                                                                   "rows": rows.num_rows})
    return {"asset": asset, "partition": partition, "rows": rows.num_rows, "to_snapshot_id": pinned,
            "new_snapshot_id": snapshot_id}


def _pinned_snapshot(platform: Platform, asset: str, partition: str) -> int | None:
    """The snapshot of ``asset`` the day's served certification was built on."""
    states = platform.ledger.partitions.states([partition])
    if asset in CERTIFIED_ASSETS:
        mine = states.served(asset, partition)
        return mine.certification.snapshot_id if mine else None
    served = next(filter(None, (states.served(product, partition) for product in CERTIFIED_ASSETS)), None)
    if served is None:
        return None
    # As maintenance protects it: the newest build up to the one the certification was decided on.
    pinned = states.pinned_build(asset, served.certification)
    return pinned.snapshot_id if pinned else None

