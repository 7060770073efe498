"""Certification candidates: what a certified asset's step records after it publishes.

The step does not certify (that happens after the whole run succeeded, see
``product/certification_gate.py``); it records, per partition, the snapshot it wrote, the
canonical fingerprint of the published rows and their controls, so the
certification gate can later pin exactly this version.
"""

from __future__ import annotations

from typing import Sequence

from ...domain.controls import AGG_CONTROLS_SQL, controls_by_date
from ...product.fingerprints import fingerprints_by_partition
from ...store.clock import RUN_FINISHED
from ...store.tables import METRIC_GROSS_REVENUE, TableSpec
from .step import Step


def record_certification_candidates(
    step: Step, con, spec: TableSpec, partitions: Sequence[str], snapshot_id: int
) -> dict[str, dict]:
    published = step.warehouse.register(con, spec, partitions, snapshot_id, name=f"published_{spec.name}")
    if spec == METRIC_GROSS_REVENUE:
        revenue = dict(
            con.sql(f"SELECT sales_date::VARCHAR, sum(value_usd)::VARCHAR FROM {published} GROUP BY 1").fetchall()
        )
        controls = {}
    else:
        controls = controls_by_date(con, AGG_CONTROLS_SQL, published)
        revenue = {p: format(c.revenue_usd, "f") for p, c in controls.items()}
    per_partition = {}
    # Hash before taking the ledger's write lock: the other lane may be writing.
    fingerprints = fingerprints_by_partition(con, published, spec.partition_column, spec.grain, partitions)
    # Certified assets are the last steps of a load: their end is the run's end
    # for the duration SLO (the latest stamp of a run wins).
    finished = step.now(RUN_FINISHED)
    with step.ledger.transaction():
        _record(step, spec, partitions, snapshot_id, fingerprints, controls, revenue, per_partition)
        for partition in partitions:
            step.ledger.runs.record_phase(step.run_id, partition, RUN_FINISHED, finished, step.lane)
    step.add_partition_metadata(per_partition)
    return per_partition


def _record(step, spec, partitions, snapshot_id, fingerprints, controls, revenue, per_partition) -> None:
    for partition in partitions:
        fingerprint = fingerprints[partition]
        step.record_built(
            partition,
            snapshot_id,
            controls=controls.get(partition),
            fingerprint=fingerprint,
            detail={"revenue_usd": revenue.get(partition, "0.00")},
        )
        per_partition[partition] = {
            "fingerprint": fingerprint,
            "snapshot_id": str(snapshot_id),
            "revenue_usd": revenue.get(partition, "0.00"),
        }
        step.log_partition(partition, "built", fingerprint=fingerprint, revenue_usd=revenue.get(partition, "0.00"))
