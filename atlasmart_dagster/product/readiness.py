"""Source readiness: decide which batches a day loads, and whether a new delivery may enter.

A day loads its accepted batches: those the raw store holds (an operator's
retired ones left out, ``batch_lifecycle.py``) and, when the landing zone
holds a batch id the raw store does not, that **new delivery** once it is
ready. It is ready when its manifest is present and truthful: it parses, it
is for this day, it was declared ready no later than now, its schema version
is known, the data file's bytes hash to ``data_sha256``, the file parses, it
has ``expected_rows`` rows, its ``source_seq`` values lie in the declared
range, and that range overlaps no committed range of another day's accepted
batch (a *sequence regression*, ``batch_lifecycle.sequence_regression``). A
correction of a day already delivered may span other days' ranges (it
re-sends the day's own numbers, and later ones for what changed since), but
may not reuse a number another day's rows carry.
Only then is the batch committed to the raw store. Anything else raises
``SourceNotReady`` naming the day and every problem found, and nothing is
written anywhere but the raw store's private staging area (which is cleaned).

Replays and repairs are built from immutable raw evidence: a batch the raw
store holds is never read from the landing zone again, so a day whose landing
folder is gone, or whose landing copy changed after admission, is rebuilt
from the raw store exactly as before. A landing copy that no longer matches
the stored evidence is not re-admitted; it becomes a note on the day's source
(``PartitionSource.notes``). The stored bytes themselves must still hash to
their manifest (``RawStore.verify``), or the load stops with
``RawEvidenceConflict``.

A range checks its days with ``prepare_partitions``: the same outcomes, in
the same order, as checking day after day, but the files of several days are
copied, hashed and profiled concurrently.
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
from ..errors import RawEvidenceConflict, SourceNotReady
from ..store.clock import format_ts
from ..store.landing import (
    CONTROL_TOTAL_FIELDS,
    Manifest,
    batch_sql,
    field_types,
    file_format,
    named_batch_id,
    parse_manifest,
    present_fields,
    structure_problems,
)
from ..store.platform import Platform
from ..store.raw_store import MANIFEST_NAME, NotARegularFile, StagedBatch, StoredBatch, sha256_file
from ..store.tables import RAW_ORDER_LINES
from ..store.warehouse import duckdb_connection
from .batch_lifecycle import SeqRange, describe_regression, lost_batches, overlapping_batches, retired_batches
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
    replayed_from_raw_store: bool  # no new delivery: every batch came from the raw store
    # What an operator should know that did not stop the load (a landing copy that no longer matches).
    notes: tuple[str, ...] = ()

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
    platform: Platform,
    stored: StoredBatch,
    contract_for: ContractResolver,
    con: duckdb.DuckDBPyConnection,
    recorded: dict[str, dict],
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
    if stored.batch_id in recorded:
        fields = tuple(json.loads(recorded[stored.batch_id]["fields_json"]))
    else:
        fields = present_fields(con, stored.data_path, file_format(stored.data_file))
    return ReadyBatch(stored, manifest, contract, fields, newly_landed=False)


@dataclass(frozen=True)
class _Landed:
    """A new delivery (a batch id the raw store does not hold) whose manifest passed; its file is checked next."""

    partition: str
    manifest: Manifest
    manifest_bytes: bytes
    data_path: Path
    contract: SourceContract


@dataclass(frozen=True)
class _Plan:
    """What a day loads, decided from its landing manifest, the ledger and the raw store."""

    partition: str
    stored: tuple[StoredBatch, ...]  # the day's accepted batches the raw store holds
    landed: _Landed | None = None  # a new delivery, to check and commit
    # The batch the landing manifest names when the raw store holds it already, and those manifest bytes.
    landing_copy: tuple[StoredBatch, bytes] | None = None


@dataclass(frozen=True)
class _Checked:
    """A plan's files checked: the staged new delivery (if any), its fields, and notes."""

    staged: StagedBatch | None
    fields: tuple[str, ...]
    notes: tuple[str, ...]

    def discard(self) -> None:
        if self.staged is not None:
            self.staged.discard()


def _precheck(platform: Platform, partition: str, now: datetime, contract_for: ContractResolver) -> _Plan:
    """Everything decided from the manifest, the ledger and the raw store: what to load, or a refusal."""
    landing = platform.landing
    retired = retired_batches(platform.ledger, partition)
    stored = tuple(s for s in platform.raw_store.batches(partition) if s.batch_id not in retired)
    lost = lost_batches(platform.ledger, partition, {s.batch_id for s in stored}, retired)
    if lost:
        # The raw store is the evidence: once the ledger accepted a batch, only `atlasmart restore`
        # may bring its stored copy back, never a fresh copy from the landing zone.
        raise RawEvidenceConflict(
            f"raw evidence lost for sales_date={partition}: the ledger accepted batch(es) {', '.join(lost)} "
            "but the raw store no longer holds them; nothing is re-created from the landing zone: "
            "run `atlasmart restore BACKUP` to bring the evidence back"
        )
    manifest_bytes = landing.read_manifest_bytes(partition)
    named = named_batch_id(manifest_bytes) if manifest_bytes is not None else None
    if manifest_bytes is None or named in retired:
        if stored:
            return _Plan(partition, stored)
        if named in retired:
            why = retired[named]
            raise SourceNotReady(partition, [
                f"the landed batch {named} was retired by {why.actor} ({why.reason}) and no other batch of the day "
                "is accepted: waiting for a new delivery"
            ], waiting=True)
        folder = landing.folder(partition)
        if not os.path.lexists(folder):
            problem = f"no landing folder {folder.name}/ and no manifest (the batch has not arrived)"
        elif os.path.lexists(landing.manifest_path(partition)) or not folder.is_dir() or folder.is_symlink():
            # a link, a pipe, a device, or a folder that is one: never followed or read
            problem = f"{landing.file_problem(partition, MANIFEST_NAME)}: nothing is read through it"
        else:
            present = sorted(p.name for p in folder.iterdir())
            problem = (
                "manifest _manifest.json missing (the ERP writes it last, so the batch is incomplete); "
                f"folder holds: {', '.join(present) or 'nothing'}"
            )
        raise SourceNotReady(partition, [problem], waiting=True)
    held = next((s for s in stored if s.batch_id == named), None)
    if held is not None:
        # Not a new delivery: the day is replayed from the raw store, whatever the landing copy says now.
        return _Plan(partition, stored, landing_copy=(held, manifest_bytes))

    manifest, problems = parse_manifest(manifest_bytes, partition)
    if manifest is None:
        raise SourceNotReady(partition, problems)
    not_yet = None  # the delivery declares itself not ready yet: alone, nothing is wrong with it (late, not wrong)
    if manifest.ready_at > now:
        not_yet = f"manifest declares ready_at {format_ts(manifest.ready_at)}, later than now {format_ts(now)}"
        problems.append(not_yet)
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
    refused = landing.file_problem(partition, manifest.data_file)
    if not os.path.lexists(data_path):
        problems.append(f"data file {manifest.data_file} named by the manifest is missing")
    elif refused is not None:
        # A data file is admitted only as a regular file inside the day's folder: a link (to a file
        # outside the landing zone, or anywhere), a named pipe or a device is never followed or read.
        problems.append(f"data file {refused}: nothing was admitted")
    if problems:
        raise SourceNotReady(partition, problems, waiting=problems == [not_yet])
    return _Plan(partition, stored, landed=_Landed(partition, manifest, manifest_bytes, data_path, contract))


def _landing_copy_notes(platform: Platform, stored: StoredBatch, manifest_bytes: bytes) -> tuple[str, ...]:
    """What differs between the landing zone's copy of a stored batch and the evidence stored at admission."""
    differences = []
    if manifest_bytes != stored.manifest_path.read_bytes():
        differences.append(f"its {MANIFEST_NAME} differs from the one stored at admission")
    landed = platform.landing.folder(stored.partition) / stored.data_file
    admitted = str(stored.manifest["data_sha256"]).lower()
    if not landed.is_file():
        differences.append(f"its {stored.data_file} is gone from the landing zone")
    elif (found := sha256_file(landed)) != admitted:
        differences.append(f"its {stored.data_file} hashes to {found[:12]}…, the stored evidence to {admitted[:12]}…")
    if not differences:
        return ()
    return (
        f"landing copy of batch {stored.batch_id} no longer matches the raw store: {'; '.join(differences)}; "
        "the day was built from the raw store and the landing copy was not re-admitted",
    )


def _check(platform: Platform, plan: _Plan, con: duckdb.DuckDBPyConnection) -> _Checked:
    """Verify the stored batches, compare the landing copy, stage and check a new delivery.

    Touches only files, the raw store's private staging area and ``con``: no
    ledger, no commit, so days can be checked concurrently.
    """
    for stored in plan.stored:
        platform.raw_store.verify(stored)
    notes = _landing_copy_notes(platform, *plan.landing_copy) if plan.landing_copy else ()
    if plan.landed is None:
        return _Checked(None, (), notes)
    staged, fields = _check_file(platform, plan.landed, con)
    return _Checked(staged, fields, notes)


def _check_file(
    platform: Platform, landed: _Landed, con: duckdb.DuckDBPyConnection
) -> tuple[StagedBatch, tuple[str, ...]]:
    """Stage (copy + hash) the landed file and profile the copy; the staged batch and its fields, or a refusal.

    A refused batch is discarded.
    """
    partition, manifest, contract = landed.partition, landed.manifest, landed.contract
    problems: list[str] = []
    try:
        staged = platform.raw_store.stage(partition, manifest.batch_id, landed.data_path, landed.manifest_bytes)
    except NotARegularFile as exc:  # replaced by a link or a pipe after the manifest checks
        raise SourceNotReady(partition, [f"data file {exc}, not a regular file inside the landing folder: "
                                         "nothing was admitted"]) from None
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


def _reused_numbers(
    platform: Platform, con: duckdb.DuckDBPyConnection, landed: _Landed, checked: _Checked, found: list[SeqRange]
) -> list[int]:
    """The source_seq values of the new delivery that rows of the ``found`` batches already carry (set-based)."""
    manifest = landed.manifest
    path = checked.staged.data_path
    fmt = file_format(manifest.data_file)
    new_rows = batch_sql(path, fmt, checked.fields, landed.contract, manifest.partition, manifest.batch_id,
                         types=field_types(con, path, fmt))
    committed = platform.warehouse.relation_sql(RAW_ORDER_LINES, sorted({f.partition for f in found}))
    batches = ", ".join("'" + f.batch_id.replace("'", "''") + "'" for f in found)
    return [row[0] for row in con.sql(
        f"SELECT DISTINCT n.source_seq FROM ({new_rows}) n JOIN ({committed}) c USING (source_seq) "
        f"WHERE c.batch_id IN ({batches}) ORDER BY 1"
    ).fetchall()]


def _admit(
    platform: Platform,
    plan: _Plan,
    checked: _Checked,
    contract_for: ContractResolver,
    con: duckdb.DuckDBPyConnection,
    accepted_in_run: list[SeqRange],
) -> PartitionSource:
    """Refuse a sequence regression, commit a new delivery to the raw store, list all the day's batches.

    The batches the ledger does not know yet (the new delivery, or a stored
    batch an earlier blocked range run committed but never loaded) must not
    overlap the committed ranges of other days' accepted batches, nor those
    of batches ``accepted_in_run`` for earlier days of the same run; this
    day's are added to it.
    """
    partition, landed = plan.partition, plan.landed
    recorded = {b["batch_id"]: b for b in platform.ledger.batches.list(partition)}
    try:
        views = [_stored_batch_view(platform, s, contract_for, con, recorded) for s in plan.stored]
        manifests = [v.manifest for v in views] + ([landed.manifest] if landed else [])
        claims = [
            SeqRange(m.batch_id, partition, m.source_seq_low, m.source_seq_high)
            for m in manifests
            if m.batch_id not in recorded and m.expected_rows > 0
        ]
        regressions = []
        for claim in claims:
            found = overlapping_batches(platform.ledger, claim, tuple(accepted_in_run))
            if not found:
                continue
            if landed is not None and claim.batch_id == landed.manifest.batch_id and views:
                # A correction of a day already delivered re-sends the day's own numbers with
                # later ones for what changed since (a refund), so its range may span other
                # days' ranges; it may not reuse a number another day committed.
                reused = _reused_numbers(platform, con, landed, checked, found)
                if not reused:
                    continue
                regressions.append(describe_regression(claim, found, reused))
            else:
                regressions.append(describe_regression(claim, found))
        if regressions:
            raise SourceNotReady(partition, regressions)
    except BaseException:
        checked.discard()
        raise
    if landed is not None:
        stored, newly = platform.raw_store.commit(checked.staged)
        views.append(ReadyBatch(stored, landed.manifest, landed.contract, checked.fields, newly_landed=newly))
    accepted_in_run.extend(claims)
    batches = tuple(sorted(views, key=lambda b: (b.manifest.source_seq_low, b.manifest.batch_id)))
    return PartitionSource(partition, batches, replayed_from_raw_store=landed is None, notes=checked.notes)


def _prepare(
    platform: Platform,
    partition: str,
    now: datetime,
    con: duckdb.DuckDBPyConnection,
    contract_for: ContractResolver,
    accepted_in_run: list[SeqRange],
) -> PartitionSource:
    plan = _precheck(platform, partition, now, contract_for)
    return _admit(platform, plan, _check(platform, plan, con), contract_for, con, accepted_in_run)


def prepare_partition(
    platform: Platform,
    partition: str,
    now: datetime,
    con: duckdb.DuckDBPyConnection,
    contract_for: ContractResolver | None = None,
) -> PartitionSource:
    """The day's batches: its accepted batches in the raw store, and a new delivery once checked and committed.

    ``contract_for`` defaults to the ledger's approvals (see contract_approvals.py).
    """
    if contract_for is None:
        contract_for = resolver(platform.ledger)
    return _prepare(platform, partition, now, con, contract_for, [])


def _checked_in_thread(platform: Platform, plan: _Plan) -> _Checked:
    con = duckdb_connection()  # a cursor per thread: DuckDB cursors are not shared between threads
    try:
        return _check(platform, plan, con)
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
    the earlier days were committed and before any later one is; a day's new
    batches count for the sequence continuity of the later days), but the
    files of many days are copied, hashed and profiled concurrently by up to
    ``os.cpu_count()`` threads: hashlib and DuckDB release the GIL, and a
    range of small days is otherwise one core waiting on the next file.
    Commits to the raw store stay on the calling thread, in day order. At
    most ``2 × workers`` days are checked ahead of the commits, which bounds
    the private copies waiting in the raw store's staging area.
    """
    if contract_for is None:
        contract_for = resolver(platform.ledger)
    accepted_in_run: list[SeqRange] = []
    workers = min(os.cpu_count() or 1, len(partitions))
    if workers <= 1 or len(set(partitions)) != len(partitions):
        return _prepare_in_turn(platform, partitions, now, con, contract_for, accepted_in_run)
    # The manifest checks read the ledger and the raw store (cheap, not thread-safe): all days first.
    first: list[_Plan | BaseException] = []
    for partition in partitions:
        try:
            first.append(_precheck(platform, partition, now, contract_for))
        except Exception as exc:  # noqa: BLE001 - raised (or recorded) at the day's turn below
            first.append(exc)
    planned = [i for i, f in enumerate(first) if isinstance(f, _Plan)]
    pending: dict[int, Future] = {}
    out: dict[str, PartitionSource | SourceNotReady] = {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="readiness") as pool:
        try:
            ahead = iter(planned)
            for i in islice(ahead, 2 * workers):
                pending[i] = pool.submit(_checked_in_thread, platform, first[i])
            for i, partition in enumerate(partitions):
                outcome = first[i]
                try:
                    if isinstance(outcome, BaseException):
                        raise outcome
                    future = pending.pop(i)
                    for j in islice(ahead, 1):
                        pending[j] = pool.submit(_checked_in_thread, platform, first[j])
                    out[partition] = _admit(platform, outcome, future.result(), contract_for, con, accepted_in_run)
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
        checked = future.result()
    except BaseException:  # noqa: BLE001 - a refused batch was discarded by its own check
        return
    checked.discard()


def _prepare_in_turn(
    platform: Platform, partitions: Sequence[str], now: datetime, con: duckdb.DuckDBPyConnection,
    contract_for: ContractResolver, accepted_in_run: list[SeqRange],
) -> dict[str, PartitionSource | SourceNotReady]:
    out: dict[str, PartitionSource | SourceNotReady] = {}
    for partition in partitions:
        try:
            out[partition] = _prepare(platform, partition, now, con, contract_for, accepted_in_run)
        except SourceNotReady as exc:
            out[partition] = exc
    return out
