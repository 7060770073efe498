"""Source readiness: decide whether a day's batch may enter the platform.

A day is ready when its manifest is present and truthful: it parses, it is for
this day, it was declared ready no later than now, its schema version is
known, the data file's bytes hash to ``data_sha256``, the file parses, it has
``expected_rows`` rows and its ``source_seq`` values lie in the declared
range. Only then is the batch committed to the raw store. Anything else raises
``SourceNotReady`` naming the day and every problem found, and nothing is
written anywhere but the raw store's private staging area (which is cleaned).

A day with no manifest in the landing zone but batches already in the raw
store is *replayed* from the raw store: replay never depends on the landing
zone still holding old files. Batches an operator retired
(``batch_lifecycle.py``) are left out of every load, the landed one included.

A range checks its days with ``prepare_partitions``: the same outcomes, in
the same order, as checking day after day, but the landed files of several
days are copied, hashed and profiled concurrently.
"""

from __future__ import annotations

import csv
import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from itertools import islice
from pathlib import Path
from typing import Callable, Sequence

import duckdb

from ..domain.contracts import CONTRACTS, Conformance, SourceContract
from ..errors import SourceNotReady
from ..store.clock import format_ts
from ..store.landing import (
    CONTROL_TOTAL_FIELDS,
    Manifest,
    batch_sql,
    field_types,
    file_format,
    parse_manifest,
    present_fields,
    structure_problems,
)
from ..store.platform import Platform
from ..store.raw_store import StagedBatch, StoredBatch
from ..store.warehouse import duckdb_connection
from .batch_lifecycle import retired_batches
from .contract_approvals import resolver

# (manifest, batch_id) -> contract to apply, or None when the version is unknown
ContractResolver = Callable[[Manifest], SourceContract | None]


@dataclass(frozen=True)
class ReadyBatch:
    stored: StoredBatch
    manifest: Manifest
    contract: SourceContract
    fields: tuple[str, ...]
    newly_landed: bool

    @property
    def conformance(self) -> Conformance:
        return self.contract.conformance(self.fields)


@dataclass(frozen=True)
class PartitionSource:
    """Everything the raw layer loads for one day: its committed batches."""

    partition: str
    batches: tuple[ReadyBatch, ...]
    replayed_from_raw_store: bool

    @property
    def expected_rows(self) -> int:
        return sum(b.manifest.expected_rows for b in self.batches)

    @property
    def new_batch_ids(self) -> list[str]:
        return [b.manifest.batch_id for b in self.batches if b.newly_landed]


def _profile(
    con: duckdb.DuckDBPyConnection, path, fmt: str, fields: tuple[str, ...], contract: SourceContract, manifest: Manifest
) -> tuple[int, int | None, int | None, dict[str, Decimal]]:
    """(rows, min source_seq, max source_seq, totals) of a data file, read by the exact reader the load uses.

    Anything this cannot parse is refused here, before the raw store commit: a
    batch the load could not read would otherwise sit in the raw store and
    fail every later load of its day.
    """
    rows_sql = batch_sql(path, fmt, fields, contract, manifest.partition, manifest.batch_id,
                         types=field_types(con, path, fmt))
    sums = ", ".join(f"coalesce(sum({name}), 0)" for name in CONTROL_TOTAL_FIELDS)
    found = con.sql(f"SELECT count(*), min(source_seq), max(source_seq), {sums} FROM ({rows_sql})").fetchall()[0]
    return found[0], found[1], found[2], {n: Decimal(v) for n, v in zip(CONTROL_TOTAL_FIELDS, found[3:])}


def _stored_batch_view(
    platform: Platform, stored: StoredBatch, contract_for: ContractResolver, con: duckdb.DuckDBPyConnection
) -> ReadyBatch:
    manifest, problems = parse_manifest(json.dumps(stored.manifest).encode(), stored.partition)
    if manifest is None:
        raise SourceNotReady(stored.partition, [f"raw store batch {stored.batch_id}: " + p for p in problems])
    contract = contract_for(manifest)
    if contract is None:
        raise SourceNotReady(
            stored.partition,
            [f"raw store batch {stored.batch_id} has unknown schema_version {manifest.schema_version!r}"],
        )
    known = platform.ledger.batches.list(stored.partition)
    recorded = next((b for b in known if b["batch_id"] == stored.batch_id), None)
    if recorded is not None:
        fields = tuple(json.loads(recorded["fields_json"]))
    else:
        fields = present_fields(con, stored.data_path, file_format(stored.data_file))
    return ReadyBatch(stored, manifest, contract, fields, newly_landed=False)


@dataclass(frozen=True)
class _Landed:
    """A day whose landing batch passed the manifest checks and now needs its file checked."""

    partition: str
    manifest: Manifest
    manifest_bytes: bytes
    data_path: Path
    contract: SourceContract
    retired: frozenset[str]


def _precheck(
    platform: Platform, partition: str, now: datetime, con: duckdb.DuckDBPyConnection, contract_for: ContractResolver
) -> PartitionSource | _Landed:
    """Everything decided from the manifest and the raw store: a replay, a refusal, or a landed file to check."""
    landing = platform.landing
    retired = retired_batches(platform.ledger, partition)
    manifest_bytes = landing.read_manifest_bytes(partition)
    manifest, problems = parse_manifest(manifest_bytes, partition) if manifest_bytes is not None else (None, [])
    landed_retired = manifest is not None and manifest.batch_id in retired
    if manifest_bytes is None or landed_retired:
        stored = [s for s in platform.raw_store.batches(partition) if s.batch_id not in retired]
        if stored:
            views = tuple(_stored_batch_view(platform, s, contract_for, con) for s in stored)
            return PartitionSource(partition, views, replayed_from_raw_store=True)
        if landed_retired:
            batch_id = manifest.batch_id
            why = retired[batch_id]
            raise SourceNotReady(partition, [
                f"the landed batch {batch_id} was retired by {why.actor} ({why.reason}) and no other batch of the day "
                "is accepted: waiting for a new delivery"
            ])
        folder = landing.folder(partition)
        if not folder.is_dir():
            problem = f"no landing folder {folder.name}/ and no manifest (the batch has not arrived)"
        else:
            present = sorted(p.name for p in folder.iterdir())
            problem = (
                "manifest _manifest.json missing (the ERP writes it last, so the batch is incomplete); "
                f"folder holds: {', '.join(present) or 'nothing'}"
            )
        raise SourceNotReady(partition, [problem])

    if manifest is None:
        raise SourceNotReady(partition, problems)
    if manifest.ready_at > now:
        problems.append(
            f"manifest declares ready_at {format_ts(manifest.ready_at)}, later than now {format_ts(now)}"
        )
    contract = contract_for(manifest)
    if contract is None:
        if manifest.schema_version in CONTRACTS:
            problems.append(
                f"schema_version {manifest.schema_version!r} needs an owner approval for batch {manifest.batch_id}"
            )
        else:
            problems.append(
                f"schema_version {manifest.schema_version!r} is unknown (known: {', '.join(sorted(CONTRACTS))})"
            )
    data_path = landing.folder(partition) / manifest.data_file
    if not data_path.is_file():
        problems.append(f"data file {manifest.data_file} named by the manifest is missing")
    if problems:
        raise SourceNotReady(partition, problems)
    return _Landed(partition, manifest, manifest_bytes, data_path, contract, frozenset(retired))


def _check_file(
    platform: Platform, landed: _Landed, con: duckdb.DuckDBPyConnection
) -> tuple[StagedBatch, tuple[str, ...]]:
    """Stage (copy + hash) the landed file and profile the copy; the staged batch and its fields, or a refusal.

    Touches only the raw store's private staging area and ``con``: no ledger,
    no commit, so days can be checked concurrently. A refused batch is discarded.
    """
    partition, manifest, contract = landed.partition, landed.manifest, landed.contract
    problems: list[str] = []
    staged = platform.raw_store.stage(partition, manifest.batch_id, landed.data_path, landed.manifest_bytes)
    try:
        if staged.data_sha256 != manifest.data_sha256:
            raise SourceNotReady(
                partition,
                [
                    f"data_sha256 mismatch: manifest says {manifest.data_sha256[:12]}…, "
                    f"the bytes of {manifest.data_file} hash to {staged.data_sha256[:12]}…"
                ],
            )
        fmt = file_format(manifest.data_file)
        try:
            structure = structure_problems(con, staged.data_path, fmt)
            if structure:
                raise SourceNotReady(partition, [f"data file {manifest.data_file}: {p}" for p in structure])
            fields = present_fields(con, staged.data_path, fmt)
            if not fields and fmt == "jsonl":
                # No rows, so no keys: an empty JSON Lines file fits any layout (a no-sales day).
                fields = contract.source_fields
            rows, seq_min, seq_max, totals = _profile(con, staged.data_path, fmt, fields, contract, manifest)
        except (duckdb.Error, UnicodeDecodeError, csv.Error) as exc:
            first_line = str(exc).strip().splitlines()[0]
            raise SourceNotReady(partition, [f"data file {manifest.data_file} is malformed: {first_line}"]) from exc
        if rows != manifest.expected_rows:
            problems.append(f"expected_rows is {manifest.expected_rows} but {manifest.data_file} has {rows} rows")
        for name, declared in (manifest.control_totals or {}).items():
            if totals[name] != declared:
                problems.append(
                    f"the manifest totals {name} at {declared}, the rows of {manifest.data_file} add up to {totals[name]}"
                )
        if seq_min is not None and (seq_min < manifest.source_seq_low or seq_max > manifest.source_seq_high):
            problems.append(
                f"source_seq range {seq_min}..{seq_max} in the file lies outside the manifest's "
                f"{manifest.source_seq_low}..{manifest.source_seq_high}"
            )
        if problems:
            raise SourceNotReady(partition, problems)
    except BaseException:
        staged.discard()
        raise
    return staged, fields


def _admit(
    platform: Platform,
    landed: _Landed,
    staged: StagedBatch,
    fields: tuple[str, ...],
    contract_for: ContractResolver,
    con: duckdb.DuckDBPyConnection,
) -> PartitionSource:
    """Commit a checked batch to the raw store and list all the day's batches."""
    manifest, partition = landed.manifest, landed.partition
    stored, newly = platform.raw_store.commit(staged)
    ready = ReadyBatch(stored, manifest, landed.contract, fields, newly_landed=newly)
    others = tuple(
        _stored_batch_view(platform, s, contract_for, con)
        for s in platform.raw_store.batches(partition)
        if s.batch_id != manifest.batch_id and s.batch_id not in landed.retired
    )
    batches = tuple(sorted(others + (ready,), key=lambda b: (b.manifest.source_seq_low, b.manifest.batch_id)))
    return PartitionSource(partition, batches, replayed_from_raw_store=False)


def prepare_partition(
    platform: Platform,
    partition: str,
    now: datetime,
    con: duckdb.DuckDBPyConnection,
    contract_for: ContractResolver | None = None,
) -> PartitionSource:
    """Check the day's landing batch, commit it to the raw store, list all its batches.

    ``contract_for`` defaults to the ledger's approvals (see contract_approvals.py).
    """
    if contract_for is None:
        contract_for = resolver(platform.ledger)
    first = _precheck(platform, partition, now, con, contract_for)
    if isinstance(first, PartitionSource):
        return first
    staged, fields = _check_file(platform, first, con)
    return _admit(platform, first, staged, fields, contract_for, con)


def _checked_in_thread(platform: Platform, landed: _Landed) -> tuple[StagedBatch, tuple[str, ...]]:
    con = duckdb_connection()  # a cursor per thread: DuckDB cursors are not shared between threads
    try:
        return _check_file(platform, landed, con)
    finally:
        con.close()


def prepare_partitions(
    platform: Platform,
    partitions: Sequence[str],
    now: datetime,
    con: duckdb.DuckDBPyConnection,
    contract_for: ContractResolver | None = None,
) -> dict[str, PartitionSource | SourceNotReady]:
    """``prepare_partition`` for each day, in order: its source, or the ``SourceNotReady`` it raised.

    The same outcomes as calling ``prepare_partition`` day after day (an
    error other than ``SourceNotReady`` propagates at its day's turn, after
    the earlier days were committed and before any later one is), but the
    landed files of many days are copied, hashed and profiled concurrently
    by up to ``os.cpu_count()`` threads: hashlib and DuckDB release the GIL,
    and a range of small days is otherwise one core waiting on the next file.
    Commits to the raw store stay on the calling thread, in day order. At
    most ``2 × workers`` days are checked ahead of the commits, which bounds
    the private copies waiting in the raw store's staging area.
    """
    if contract_for is None:
        contract_for = resolver(platform.ledger)
    workers = min(os.cpu_count() or 1, len(partitions))
    if workers <= 1 or len(set(partitions)) != len(partitions):
        return _prepare_in_turn(platform, partitions, now, con, contract_for)
    # The manifest checks read the ledger and the raw store (cheap, not thread-safe): all days first.
    first: list[PartitionSource | _Landed | BaseException] = []
    for partition in partitions:
        try:
            first.append(_precheck(platform, partition, now, con, contract_for))
        except Exception as exc:  # noqa: BLE001 - raised (or recorded) at the day's turn below
            first.append(exc)
    landed = [i for i, f in enumerate(first) if isinstance(f, _Landed)]
    pending: dict[int, Future] = {}
    out: dict[str, PartitionSource | SourceNotReady] = {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="readiness") as pool:
        try:
            ahead = iter(landed)
            for i in islice(ahead, 2 * workers):
                pending[i] = pool.submit(_checked_in_thread, platform, first[i])
            for i, partition in enumerate(partitions):
                outcome = first[i]
                try:
                    if isinstance(outcome, BaseException):
                        raise outcome
                    if isinstance(outcome, _Landed):
                        future = pending.pop(i)
                        for j in islice(ahead, 1):
                            pending[j] = pool.submit(_checked_in_thread, platform, first[j])
                        staged, fields = future.result()
                        outcome = _admit(platform, outcome, staged, fields, contract_for, con)
                    out[partition] = outcome
                except SourceNotReady as exc:
                    out[partition] = exc
        finally:
            # Stopped early (an error, an interrupt): later days' copies never reach the raw store.
            for future in pending.values():
                if not future.cancel():
                    _discard_result(future)
    return out


def _discard_result(future: Future) -> None:
    try:
        staged, _ = future.result()
    except BaseException:  # noqa: BLE001 - a refused batch was discarded by its own check
        return
    staged.discard()


def _prepare_in_turn(
    platform: Platform, partitions: Sequence[str], now: datetime, con: duckdb.DuckDBPyConnection,
    contract_for: ContractResolver,
) -> dict[str, PartitionSource | SourceNotReady]:
    out: dict[str, PartitionSource | SourceNotReady] = {}
    for partition in partitions:
        try:
            out[partition] = prepare_partition(platform, partition, now, con, contract_for)
        except SourceNotReady as exc:
            out[partition] = exc
    return out
