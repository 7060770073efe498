"""Raw layer: landed ERP batches, gated on source readiness, kept as immutable evidence."""


import dagster as dg

from ...domain.check_names import MANIFEST_ROWS_MATCH, SOURCE_CONTRACT_CONFORMS
from ...errors import SourceNotReady
from ...product.contract_approvals import resolver
from ...product.lanes import guard_backfill_scope
from ...product.readiness import PartitionSource, prepare_partitions
from ...store.clock import RUN_STARTED
from ...store.landing import batch_sql, field_types, file_format
from ...store.ledger.partition_states import BLOCKED_UPSTREAM
from ...store.tables import RAW_ORDER_LINES
from ...store.warehouse import duckdb_connection, plan_chunks
from ..resources import AtlasmartResource
from ..retries import classified
from .asset_args import DAILY_ASSET_ARGS, blocking_check, table_asset_args
from .step import CheckOutcome, Step


def partition_rows_sql(source: PartitionSource, con) -> str:
    """SQL for all rows of a day's committed batches (the writer orders them by batch and row)."""
    parts = []
    for batch in source.batches:
        fmt = file_format(batch.stored.data_file)
        parts.append(
            batch_sql(
                batch.stored.data_path,
                fmt,
                batch.fields,
                batch.contract,
                source.partition,
                batch.manifest.batch_id,
                types=field_types(con, batch.stored.data_path, fmt),
            )
        )
    return " UNION ALL ".join(parts)


def prepare_sources(step: Step, con) -> dict[str, PartitionSource]:
    """Readiness for every partition of the run; blocks the whole run if any is not ready."""
    now = step.now()
    contract_for = resolver(step.ledger)  # the approvals, read once for the whole range
    sources: dict[str, PartitionSource] = {}
    refusals: dict[str, SourceNotReady] = {}
    for partition, outcome in prepare_partitions(step.platform, step.partitions, now, con, contract_for).items():
        if isinstance(outcome, SourceNotReady):
            refusals[partition] = outcome
        else:
            sources[partition] = outcome
    blocked = {partition: refusal.problems for partition, refusal in refusals.items()}
    for partition, problems in blocked.items():
        step.ledger.partitions.append(
            RAW_ORDER_LINES.name,
            partition,
            BLOCKED_UPSTREAM,
            now,
            actor=f"run:{step.run_id}",
            run_id=step.run_id,
            lane=step.lane,
            reason="source not ready",
            # waiting: nothing complete arrived yet (late); else a delivery was refused (wrong)
            detail={"problems": problems, "waiting": refusals[partition].waiting},
        )
        step.log_partition(partition, "blocked_upstream", problems=problems)
    if blocked and len(step.partitions) == 1:
        raise refusals[step.partitions[0]]
    if blocked:
        # A range is all or nothing: publishing the ready days of a repair
        # would leave the range half old, half new with no way to tell.
        first, last = step.partitions[0], step.partitions[-1]
        problems = [f"sales_date={p}: {'; '.join(found)}" for p, found in sorted(blocked.items())]
        problems.append(f"nothing in {first}..{last} was published; narrow the range or wait for the source")
        raise SourceNotReady(
            min(blocked), problems, scope=f"{len(blocked)} of {len(step.partitions)} partitions of {first}..{last}"
        )
    return sources


@dg.asset(
    **table_asset_args(RAW_ORDER_LINES, deps=["erp_order_lines"], owners=["team:data-platform"]),
    **DAILY_ASSET_ARGS,
    check_specs=[
        blocking_check(MANIFEST_ROWS_MATCH, RAW_ORDER_LINES,
                       "Rows published for the day equal the sum of expected_rows of its batch manifests."),
        blocking_check(SOURCE_CONTRACT_CONFORMS, RAW_ORDER_LINES,
                       "Every batch of the day has exactly the field layout of its source contract."),
    ],
)
@classified
def raw_order_lines(context: dg.AssetExecutionContext, atlasmart: AtlasmartResource):
    """Landed ERP order lines of a business day, one row per source row, with batch lineage.

    Grain: (batch_id, source_row). Before anything is written a new delivery
    must be *ready*: manifest present and truthful (hash, row count, sequence
    range, known schema version, declared ready) and its source_seq range clear
    of other days' committed ranges. A day that is not ready fails this step
    with a non-retryable "source not ready" error, records BLOCKED_UPSTREAM in
    the ledger, and nothing downstream runs. Ready batches are copied write-once
    into the raw store (keyed by batch_id); the day's partition is then
    replaced atomically with the rows of all its accepted batches, read from
    the raw store (a re-run or repair never reads the landing zone again).
    Values that fail to cast are kept as NULL and listed in type_error_fields.
    """
    step = Step(context, atlasmart, RAW_ORDER_LINES.name)
    guard_backfill_scope(step.tags, step.partitions, step.now())
    started = step.now(RUN_STARTED)
    with step.ledger.transaction():
        for partition in step.partitions:
            step.ledger.runs.record_phase(step.run_id, partition, RUN_STARTED, started, step.lane)

    con = duckdb_connection()
    sources = prepare_sources(step, con)
    with step.ledger.transaction():
        for source in sources.values():
            for batch in source.batches:
                step.ledger.batches.record(
                    batch.manifest.to_json(), batch.contract.version, batch.fields, started, step.run_id
                )

    rows_check = CheckOutcome(
        RAW_ORDER_LINES.name, MANIFEST_ROWS_MATCH, True, "published rows = sum of manifest expected_rows"
    )
    contract_check = CheckOutcome(
        RAW_ORDER_LINES.name, SOURCE_CONTRACT_CONFORMS, True, "batch field layout = source contract"
    )
    per_partition: dict[str, dict] = {}
    expected = {p: s.expected_rows for p, s in sources.items()}
    for chunk in plan_chunks(expected, step.platform.chunk_rows):
        # Each day's rows are its own batches' files: written day by day, as a day alone is, with
        # no staged copy of the chunk (decoding and re-reading 2M rows cost a third of the step).
        rows = {p: f"({partition_rows_sql(sources[p], con)})" for p in chunk}
        snapshot_id = step.warehouse.overwrite_sql(RAW_ORDER_LINES, con, rows, chunk, step.snapshot_properties())
        published = step.warehouse.partition_row_counts(RAW_ORDER_LINES, chunk, snapshot_id)
        with step.ledger.transaction():
            record_chunk(step, chunk, sources, published, snapshot_id, rows_check, contract_check, per_partition)
    con.close()
    step.add_partition_metadata(per_partition)
    yield dg.MaterializeResult(
        metadata={"partitions": len(step.partitions), "rows": sum(m["rows"] for m in per_partition.values())}
    )
    yield from step.report_checks([rows_check, contract_check])


def record_chunk(step, chunk, sources, published, snapshot_id, rows_check, contract_check, per_partition) -> None:
    """Checks, ledger records and log lines for one written chunk of days."""
    for partition in chunk:
        source = sources[partition]
        rows_check.add(partition, published[partition] == source.expected_rows, published[partition], source.expected_rows)
        layouts = {
            b.manifest.batch_id: {
                "contract": b.contract.version,
                "missing": list(b.conformance.missing),
                "unexpected": list(b.conformance.unexpected),
            }
            for b in source.batches
        }
        conforms = all(b.conformance.conforms for b in source.batches)
        contract_check.add(
            partition,
            conforms,
            layouts,
            {b.manifest.batch_id: list(b.contract.source_fields) for b in source.batches if not b.conformance.conforms},
        )
        batch_ids = [b.manifest.batch_id for b in source.batches]
        # A landing copy that no longer matches the raw store did not stop the load: say so where people look.
        noted = {"readiness_notes": list(source.notes)} if source.notes else {}
        step.record_built(
            partition,
            snapshot_id,
            detail={"batch_ids": batch_ids, "rows": published[partition], "new_batches": source.new_batch_ids, **noted},
        )
        per_partition[partition] = {
            "rows": published[partition],
            "batch_ids": ", ".join(batch_ids),
            "replayed_from_raw_store": source.replayed_from_raw_store,
            "snapshot_id": str(snapshot_id),
            **{k: "; ".join(v) for k, v in noted.items()},
        }
        for note in source.notes:
            step.context.log.warning(f"sales_date={partition}: {note}")
        step.log_partition(
            partition,
            "ok" if conforms else "contract_violation",
            batch_ids=batch_ids,
            rows=published[partition],
            replayed_from_raw_store=source.replayed_from_raw_store,
            **noted,
        )
