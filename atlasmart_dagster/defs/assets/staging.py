"""Staging layer: the quality gate splits raw rows into accepted versions and quarantine."""

from contextlib import closing

import dagster as dg

from ...domain.check_names import QUALITY_WITHIN_THRESHOLDS, STAGED_ROWS_RECONCILE
from ...product.contract_approvals import contract_of_day
from ...store.tables import QUARANTINE_ORDER_LINES, RAW_ORDER_LINES, STG_ORDER_LINES
from ...store.warehouse import duckdb_connection, plan_chunks
from ...transforms.staging import REASONS, day_queries, run_gate, shared_gate_table
from ..resources import AtlasmartResource
from ..retries import classified
from .asset_args import DAILY_ASSET_ARGS, blocking_check, table_asset_args
from .step import CheckOutcome, Step


def manifest_rows(step: Step, con, partitions: list[str], gated: str = "gated") -> dict[str, int | None]:
    """Sum of expected_rows over the batches present in each judged raw partition (None: unknown batch)."""
    present = con.sql(
        f"SELECT partition_date::VARCHAR, list(DISTINCT batch_id ORDER BY batch_id) FROM {gated} GROUP BY 1"
    ).fetchall()
    known = {b["batch_id"]: b["expected_rows"] for p in partitions for b in step.ledger.batches.list(p)}
    out: dict[str, int | None] = {p: 0 for p in partitions}
    for partition, batch_ids in present:
        counts = [known.get(b) for b in batch_ids]
        out[partition] = None if None in counts else sum(counts)
    return out


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            STG_ORDER_LINES.name,
            **table_asset_args(STG_ORDER_LINES, deps=[RAW_ORDER_LINES.name], owners=["team:data-platform"]),
            description=(
                "Order line versions that passed the quality gate. Grain: (order_id, line_no, source_seq). "
                "is_current marks the newest accepted version of each order line; earlier versions stay as "
                "history. Non-paid lines are accepted here and excluded from fact_sales."
            ),
        ),
        dg.AssetSpec(
            QUARANTINE_ORDER_LINES.name,
            **table_asset_args(QUARANTINE_ORDER_LINES, deps=[RAW_ORDER_LINES.name], owners=["team:data-platform"]),
            description=(
                "Rows the quality gate refused, one reason per row (" + ", ".join(REASONS) + "), with the "
                "raw text of values that failed to cast. Kept for diagnosis; never read by consumers."
            ),
        ),
    ],
    **DAILY_ASSET_ARGS,
    check_specs=[
        blocking_check(
            STAGED_ROWS_RECONCILE, STG_ORDER_LINES, "Manifest rows = raw rows = accepted + quarantined, per day.",
            additional_deps=[QUARANTINE_ORDER_LINES.name],
        ),
        blocking_check(
            QUALITY_WITHIN_THRESHOLDS, STG_ORDER_LINES,
            "The day's accepted share and each quarantine reason's share are within the source contract's "
            "quality thresholds: a day whose rows were mostly refused is not certified (never served as zeros).",
            additional_deps=[QUARANTINE_ORDER_LINES.name],
        ),
    ],
)
@classified
def stg_order_lines(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource):
    """Run the quality gate over raw rows; write accepted rows and quarantine atomically per table."""
    step = Step(context, atlasmart, STG_ORDER_LINES.name)
    reconcile = CheckOutcome(
        STG_ORDER_LINES.name, STAGED_ROWS_RECONCILE, True, "manifest rows = raw rows = accepted + quarantined"
    )
    quality = CheckOutcome(
        STG_ORDER_LINES.name, QUALITY_WITHIN_THRESHOLDS, True, "accepted and quarantined shares within the contract"
    )
    staged_meta: dict[str, dict] = {}
    quarantine_meta: dict[str, dict] = {}
    counts = step.warehouse.partition_row_counts(RAW_ORDER_LINES, step.partitions)
    # Each chunk's gate outcome goes in a table every cursor can read: each day's staged and quarantined
    # rows are then written from it day by day, as a day alone is, with no staged copy of the chunk to sort.
    with closing(duckdb_connection()) as con, shared_gate_table(con) as gated:
        for chunk in plan_chunks(counts, step.platform.chunk_rows):
            step.warehouse.register(con, RAW_ORDER_LINES, chunk)
            staged, quarantined = run_gate(con, table=gated, shared=True)
            stg_snapshot = step.warehouse.overwrite_sql(
                STG_ORDER_LINES, con, day_queries(staged, chunk), chunk, step.snapshot_properties()
            )
            q_snapshot = step.warehouse.overwrite_sql(
                QUARANTINE_ORDER_LINES, con, day_queries(quarantined, chunk), chunk, step.snapshot_properties()
            )
            expected = manifest_rows(step, con, chunk, gated)
            accepted = step.warehouse.partition_row_counts(STG_ORDER_LINES, chunk, stg_snapshot)
            refused = step.warehouse.partition_row_counts(QUARANTINE_ORDER_LINES, chunk, q_snapshot)
            reasons: dict[str, dict[str, int]] = {p: {} for p in chunk}
            for day, reason, n in con.sql(
                f"SELECT partition_date::VARCHAR, reason, count(*) FROM {gated} WHERE reason IS NOT NULL GROUP BY ALL ORDER BY ALL"
            ).fetchall():
                reasons[day][reason] = n
            with step.ledger.transaction():
                for partition in chunk:
                    raw_rows = counts[partition]
                    observed = {
                        "manifest_rows": expected[partition],
                        "raw_rows": raw_rows,
                        "accepted": accepted[partition],
                        "quarantined": refused[partition],
                    }
                    ok = expected[partition] == raw_rows == accepted[partition] + refused[partition]
                    reconcile.add(partition, ok, observed, {"staged": expected[partition], "rule": "accepted + quarantined"})
                    thresholds = contract_of_day(step.ledger, partition).quality
                    breaches = thresholds.breaches(raw_rows, accepted[partition], reasons[partition])
                    quality.add(
                        partition,
                        not breaches,
                        {"rows": raw_rows, "accepted": accepted[partition], "reasons": reasons[partition],
                         "breaches": breaches},
                        {"min_accepted_share": thresholds.min_accepted_share,
                         "max_share_by_reason": dict(thresholds.max_share_by_reason),
                         "max_share_other_reasons": thresholds.max_share_other_reasons},
                    )
                    step.record_built(partition, stg_snapshot, detail=observed)
                    step.record_built(partition, q_snapshot, detail={"reasons": reasons[partition]},
                                      asset=QUARANTINE_ORDER_LINES.name)
                    staged_meta[partition] = {
                        "staged": raw_rows,
                        "accepted": accepted[partition],
                        "quarantined": refused[partition],
                    }
                    quarantine_meta[partition] = {"quarantined": refused[partition], "reasons": dg.MetadataValue.json(reasons[partition])}
                    step.log_partition(partition, "ok" if ok else "mismatch", **observed, reasons=reasons[partition])
    step.add_partition_metadata(staged_meta, asset_key=STG_ORDER_LINES.name)
    step.add_partition_metadata(quarantine_meta, asset_key=QUARANTINE_ORDER_LINES.name)
    yield dg.MaterializeResult(asset_key=STG_ORDER_LINES.name)
    yield dg.MaterializeResult(asset_key=QUARANTINE_ORDER_LINES.name)
    yield from step.report_checks([reconcile, quality])
