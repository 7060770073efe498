"""Verify: recompute what was certified and compare it with what the ledger recorded.

It recomputes the controls and fingerprints of every certified partition and
compares them with the ledger, checks the raw evidence against its hashes,
and checks that every layer reconciles with controls recomputed from raw; a
file it cannot read or a sum that overflows is a finding about that
partition, never a crash. It works on the embedded home and the team
deployment alike.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from ...domain.controls import ControlTuple, total
from ...product.canonical_controls import canonical_controls, verify_partitions
from ...product.fingerprints import fingerprint_relation
from ...product.published_controls import controls_of, fingerprints_of, metric_revenue_of
from ...store.ledger.partition_states import BUILT
from ...store.platform import Platform
from ...store.tables import (
    CERTIFIED_ASSETS,
    CONTROL_TUPLE,
    FACT_SALES,
    METRIC_GROSS_REVENUE,
    RAW_ORDER_LINES,
    REGISTRY,
    TABLES_BY_NAME,
    TableSpec,
)
from ...store.warehouse import Warehouse, duckdb_connection


def layer_tables() -> list[TableSpec]:
    """Every table ``verify`` reads for a day's reconciliation, in the order the chain builds them."""
    return REGISTRY.specs(lambda s: s is RAW_ORDER_LINES or s.controls is not None)


# Called with (source, destination) before backup or restore writes: creates
def _finding(scope: str, kind: str, asset: str | None, partition: str | None, message: str) -> dict[str, Any]:
    return {"scope": scope, "kind": kind, "asset": asset, "partition": partition, "message": message}


def read_failure(exc: BaseException) -> tuple[str, str]:
    """(kind, one-line reason) of an exception raised while reading a partition."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    lowered = text.lower()
    if isinstance(exc, duckdb.ConversionException | duckdb.OutOfRangeException) and (
            "out of range" in lowered or "overflow" in lowered):
        return "overflow", f"its sums overflow: {text}"
    if isinstance(exc, FileNotFoundError) or (isinstance(exc, duckdb.IOException) and "no files found" in lowered):
        return "missing_file", f"a file is missing: {text}"
    return "unreadable", f"unreadable ({type(exc).__name__}: {text})"


def _stored_batch(platform: Platform, batch: dict):
    """The raw store's batch, or None when it is gone (on an object store, a data file lost from the bucket)."""
    try:
        return platform.raw_store.get(batch["partition"], batch["batch_id"])
    except FileNotFoundError:
        return None


def missing_files(wh: Warehouse, spec: TableSpec, partition: str, snapshot_id: int | None) -> list[str]:
    """Data files of one partition at a snapshot that are not on disk, relative to the home (or shared folder)."""
    files = wh.data_files(spec, [partition], snapshot_id)
    if wh.objects is not None:
        return [f for f in files if not wh.objects.exists(f)]
    root = wh.home.data_root
    return [str(Path(f).relative_to(root)) if Path(f).is_relative_to(root) else f
            for f in files if not Path(f).exists()]


def _check_certified(wh: Warehouse, spec: TableSpec, partition: str, cert) -> list[dict[str, Any]]:
    """What is wrong with one certified partition: unreadable, or not what was certified."""
    where = f"{spec.name} {partition}"

    def found(kind: str, message: str) -> list[dict[str, Any]]:
        return [_finding("certified", kind, spec.name, partition, f"{where}: {message}")]

    try:
        table = wh.existing(spec)
        if cert.snapshot_id is not None and (table is None or table.snapshot_by_id(cert.snapshot_id) is None):
            return found("snapshot_missing", f"certified snapshot {cert.snapshot_id} is no longer in the table")
        missing = missing_files(wh, spec, partition, cert.snapshot_id)
        if missing:
            return found("missing_file", f"certified version unreadable: file{'s' if len(missing) > 1 else ''} "
                                         f"missing ({', '.join(missing)})")
        fingerprint = fingerprints_of(wh, spec, [partition], cert.snapshot_id)[partition]
        controls = None
        if spec != METRIC_GROSS_REVENUE and cert.controls is not None:
            controls = controls_of(wh, spec, [partition], cert.snapshot_id)[partition]
    except Exception as exc:  # noqa: BLE001 - whatever stops the read is exactly what verify reports
        kind, reason = read_failure(exc)
        return found(kind, f"certified version {reason}")
    out = []
    if fingerprint != cert.fingerprint:
        out += found("fingerprint", f"fingerprint {fingerprint[:12]}… differs from certified {cert.fingerprint[:12]}…")
    if controls is not None and controls != cert.controls:
        out += found("controls", f"controls {controls} differ from certified {cert.controls}")
    return out


def _layer_probes(platform: Platform) -> list[tuple[str, Callable[[str], Any]]]:
    """One reader per table a day's reconciliation reads, to find which one fails."""
    wh = platform.warehouse
    probes: list[tuple[str, Callable[[str], Any]]] = [(RAW_ORDER_LINES.name, lambda d: canonical_controls(platform, [d]))]
    for spec in REGISTRY.specs(lambda s: s.controls == CONTROL_TUPLE):
        probes.append((spec.name, lambda d, spec=spec: controls_of(wh, spec, [d])))
    probes.append((METRIC_GROSS_REVENUE.name, lambda d: metric_revenue_of(wh, [d])))
    return probes


def _check_layers(platform: Platform, days: list[str]) -> list[dict[str, Any]]:
    """Findings of every day's reconciliation with raw; a day that cannot be read is a finding, not a crash."""
    findings, readable = [], []
    for day in days:
        missing = []
        for spec in layer_tables():
            try:
                files = missing_files(platform.warehouse, spec, day, None)
            except Exception as exc:  # noqa: BLE001 - e.g. a manifest of the table is gone
                kind, reason = read_failure(exc)
                missing.append(_finding("layers", kind, spec.name, day, f"{day}: {spec.name} {reason}"))
                continue
            if files:
                missing.append(_finding("layers", "missing_file", spec.name, day,
                                        f"{day}: {spec.name} unreadable: missing {', '.join(files)}"))
        findings += missing
        if not missing:
            readable.append(day)
    if not readable:
        return findings
    try:
        per_day = verify_partitions(platform, readable)["per_day"]
    except Exception:  # noqa: BLE001 - one bad day must not hide the others: reconcile day by day
        per_day = {}
        for day in readable:
            try:
                per_day[day] = verify_partitions(platform, [day])["per_day"][day]
            except Exception as exc:  # noqa: BLE001 - reported below, with the table that fails
                findings.append(_unreadable_day(platform, day, exc))
    for day, result in sorted(per_day.items()):
        if result["mismatches"]:
            tables = [m for m in result["mismatches"] if m in TABLES_BY_NAME]
            findings.append(_finding("layers", "mismatch", ", ".join(tables) or None, day,
                                     f"{day}: {', '.join(result['mismatches'])} disagree with controls "
                                     f"recomputed from raw {result['canonical']}"))
    return sorted(findings, key=lambda f: f["partition"])


def _unreadable_day(platform: Platform, day: str, exc: BaseException) -> dict[str, Any]:
    """The finding for a day whose reconciliation raised: which table, and why."""
    asset, cause = None, exc
    for name, probe in _layer_probes(platform):
        try:
            probe(day)
        except Exception as probe_exc:  # noqa: BLE001 - the first table that cannot be read is the culprit
            asset, cause = name, probe_exc
            break
    kind, reason = read_failure(cause)
    return _finding("layers", kind, asset, day, f"{day}: {asset or 'reconciliation'} {reason}")


def _never_built(platform: Platform, days: list[str]) -> list[dict[str, Any]]:
    """Days loaded to raw that no later layer was ever built for, and that no later layer holds rows of.

    A batch refused at the contract gate (or a run stopped before staging)
    publishes nothing after raw: there is nothing to reconcile, so such a day
    is reported as not built rather than as a mismatch. A day any later layer
    was built for, or holds rows of, is reconciled as usual.
    """
    built = {e.partition for e in platform.ledger.partitions.states(days).events((BUILT,))
             if e.asset != RAW_ORDER_LINES.name}
    candidates = [d for d in days if d not in built]
    if not candidates:
        return []
    held = [platform.warehouse.partition_row_counts(spec, candidates) for spec in layer_tables() if spec != RAW_ORDER_LINES]
    return [_finding("layers", "not_built", None, day, f"{day}: loaded to raw but never built (refused before "
                     "staging, e.g. at the contract gate): nothing after raw to reconcile")
            for day in candidates if not any(counts[day] for counts in held)]


def verify(platform: Platform) -> dict[str, Any]:
    """Recompute and compare everything the ledger vouches for; report, never crash, per partition.

    Every finding is ``{scope, kind, asset, partition, message}``. Scopes:
    ``certified`` (a served version no longer has the certified fingerprint
    or controls, or cannot be read), ``raw`` (raw evidence missing or
    changed) and ``layers`` (a layer disagrees with the controls recomputed
    from raw, e.g. after an interrupted run, or cannot be read; consumers are
    still served certified versions, but the day needs a re-run). Kinds say
    what was found: ``missing_file``, ``snapshot_missing``, ``overflow``,
    ``unreadable``, ``fingerprint``, ``controls``, ``mismatch``,
    ``raw_missing``, ``raw_changed``. A day loaded to raw but never built
    after it (refused at the contract gate) is listed in ``not_built``, not
    in the findings. ``certified_ok`` is what consumers
    rely on; ``ok`` means everything agrees. ``problems`` and ``by_kind``
    (per scope) hold the same messages.
    """
    ledger, wh = platform.ledger, platform.warehouse
    findings: list[dict[str, Any]] = []
    checked = {"certified_partitions": 0, "raw_batches": 0, "days": 0}
    served_states = ledger.partitions.states(assets=CERTIFIED_ASSETS)
    for asset in CERTIFIED_ASSETS:
        spec = TABLES_BY_NAME[asset]
        for partition, served in sorted(served_states.served_map(asset).items()):
            checked["certified_partitions"] += 1
            findings += _check_certified(wh, spec, partition, served.certification)
    batches = ledger.batches.list()
    for batch in batches:
        checked["raw_batches"] += 1
        stored = _stored_batch(platform, batch)
        found_sha = platform.raw_store.stored_sha256(stored) if stored is not None else None
        if found_sha is None:
            findings.append(_finding("raw", "raw_missing", RAW_ORDER_LINES.name, batch["partition"],
                                     f"raw batch {batch['batch_id']} is missing from the raw store"))
        elif found_sha != batch["data_sha256"]:
            findings.append(_finding("raw", "raw_changed", RAW_ORDER_LINES.name, batch["partition"],
                                     f"raw batch {batch['batch_id']} no longer hashes to its manifest's data_sha256"))
    days = sorted({b["partition"] for b in batches})
    checked["days"] = len(days)
    not_built = _never_built(platform, days)
    findings += _check_layers(platform, [d for d in days if d not in {n["partition"] for n in not_built}])
    by_kind = {scope: [f["message"] for f in findings if f["scope"] == scope] for scope in ("certified", "raw", "layers")}
    return {
        "ok": not findings,
        "certified_ok": not by_kind["certified"] and not by_kind["raw"],
        "findings": findings,
        "problems": [f["message"] for f in findings],
        "by_kind": by_kind,
        "checked": checked,
        "not_built": not_built,  # days with nothing after raw to check: reported, never a failure
    }


def fact_rows_sha256(platform: Platform) -> str:
    """SHA-256 of every fact row, in canonical order (the DR drill's before/after proof)."""
    con = duckdb_connection()
    try:
        view = platform.warehouse.register(con, FACT_SALES, name="dr_fact")
        return fingerprint_relation(con, view, ("sales_date",) + FACT_SALES.grain)
    finally:
        con.close()


def total_fact_controls(platform: Platform) -> ControlTuple:
    days = sorted({b["partition"] for b in platform.ledger.batches.list()})
    return total(controls_of(platform.warehouse, FACT_SALES, days).values())


