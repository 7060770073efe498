"""Table maintenance: expire snapshots nobody can still need, remove files nothing references.

Every partition write adds Iceberg snapshots, and pyiceberg's commit time
grows with the number of snapshots in a table's metadata (measured here:
~0.3 s at 200 snapshots, ~1.3 s at 600). Expiring old snapshots keeps commits
fast, but a snapshot may still be needed: consumers read served
certifications by snapshot, the certification gate and ``verify`` re-read
the fact, aggregate and metric versions a served certification was built
on, every version a day was ever certified at stays readable (a restated
day's earlier figures: ``atlasmart controls --version``), a build held for
its owner's approval stays approvable (with the chain it was built on), and an open
incident keeps the versions it withdrew as evidence. Those are protected, with every ref's snapshot (the
``certified`` branch head and the version tags, ``product/certified_branch.py``) and the newest ``keep_last`` snapshots of every table;
everything else is expired. Files referenced by no remaining snapshot (and
older than an hour, so an in-flight write is never touched) can then be
deleted: in the table's data folder, or under its data prefix on an object
store (a worker killed between its upload and its commit leaves such files).
"""

from __future__ import annotations

import time
from typing import Any

from ...product.anomaly import ANOMALY_HELD
from ...product.restatements import RESTATEMENT_HELD, held_builds, held_reasons
from ...store.ledger.incidents import IncidentStore
from ...store.ledger.partition_states import BUILT, CERTIFIED, WITHDRAWN
from ...store.platform import Platform
from ...store.tables import ALL_TABLES, CERTIFIED_ASSETS, CHAIN_PINS
from ...store.warehouse import reachable_files

ORPHAN_MIN_AGE_SECONDS = 3600


def protected_snapshots(platform: Platform) -> dict[str, set[int]]:
    """Per table, the snapshot ids the ledger still relies on."""
    ledger = platform.ledger
    states = ledger.partitions.states()  # every day, one read: expiry must see every reference
    protected: dict[str, set[int]] = {spec.name: set() for spec in ALL_TABLES}
    served_builds = []
    for asset in CERTIFIED_ASSETS:
        for versions in states.versions_map(asset).values():
            protected[asset].update(v.certification.snapshot_id for v in versions
                                    if v.certification.snapshot_id is not None)
        for partition, served in states.served_map(asset).items():
            cert = served.certification
            if cert.snapshot_id is not None:
                protected[asset].add(cert.snapshot_id)
            served_builds.append((partition, cert.detail.get("built_event_id") or cert.id))
    # A build held for its owner's decision (a restatement, an anomaly) is approved at its own snapshots, which
    # need not be current any more (a later day's load, a rollback of the day on main).
    partitions = states.days((BUILT,))
    for partition, reason in held_reasons(platform, partitions, (RESTATEMENT_HELD, ANOMALY_HELD)).items():
        for build in held_builds(platform, partition, ANOMALY_HELD if reason.startswith(ANOMALY_HELD)
                                 else RESTATEMENT_HELD, states):
            if build.snapshot_id is not None:
                protected[build.asset].add(build.snapshot_id)
            served_builds.append((partition, build.id))
    for partition, built_id in served_builds:
        for asset in CHAIN_PINS:
            pinned = states.get(asset, partition).build_up_to(built_id)
            if pinned is not None and pinned.snapshot_id is not None:
                protected[asset].add(pinned.snapshot_id)
    open_ids = {i.id for i in IncidentStore(ledger).open_incidents()}
    certifications = {e.id: e for e in states.events((CERTIFIED,))}
    for event in states.events((WITHDRAWN,)):
        if event.detail.get("incident_id") in open_ids:
            for cert_id in event.detail.get("certification_ids", []):
                cert = certifications.get(cert_id)
                if cert is not None and cert.snapshot_id is not None:
                    protected[cert.asset].add(cert.snapshot_id)
    return protected


def expire_snapshots(platform: Platform, keep_last: int = 20) -> dict[str, Any]:
    """Expire every unprotected snapshot beyond the newest ``keep_last`` of each table."""
    protected = protected_snapshots(platform)
    report = {}
    for spec in ALL_TABLES:
        table = platform.warehouse.existing(spec)
        if table is None or table.current_snapshot() is None:
            continue
        snapshots = sorted(table.snapshots(), key=lambda s: s.sequence_number)
        keep = {s.snapshot_id for s in snapshots[-keep_last:]} | protected[spec.name]
        keep.add(table.current_snapshot().snapshot_id)
        # Every ref's snapshot: the head of the ``certified`` branch (what any engine is served now) and each
        # ``certified-<day>-v<n>`` tag. The branch's older commits may go: the files its head shares with main
        # stay referenced by it (``reachable_files``), so no orphan sweep removes them.
        keep |= {ref.snapshot_id for ref in table.metadata.refs.values()}
        expire = [s.snapshot_id for s in snapshots if s.snapshot_id not in keep]
        if expire:
            table.maintenance.expire_snapshots().by_ids(expire).commit()
        report[spec.name] = {"snapshots": len(snapshots), "expired": len(expire), "kept": len(snapshots) - len(expire)}
    return report


def remove_orphan_files(platform: Platform, min_age_seconds: int = ORPHAN_MIN_AGE_SECONDS) -> dict[str, int]:
    """Delete data files under each table that no retained snapshot references."""
    removed = {}
    now = time.time()
    for spec in ALL_TABLES:
        table = platform.warehouse.existing(spec)
        if table is None:
            continue
        referenced = set(reachable_files(table))
        objects = platform.warehouse.objects
        if objects is not None:
            old = [url for url, mtime in objects.entries(platform.warehouse.data_uri(spec), ".parquet")
                   if url not in referenced and now - mtime >= min_age_seconds]
            for url in old:
                objects.delete(url)
            removed[spec.name] = len(old)
            continue
        data_dir = platform.warehouse.data_dir(spec)
        count = 0
        for path in data_dir.rglob("*.parquet"):  # nothing when the folder does not exist
            if str(path) not in referenced and now - path.stat().st_mtime >= min_age_seconds:
                path.unlink()
                count += 1
        for folder in sorted(data_dir.rglob("*"), reverse=True):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        removed[spec.name] = count
    return removed



