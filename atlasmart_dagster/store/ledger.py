"""The ledger: AtlasMart's append-only record of what happened and what is served.

Dagster's event log knows runs and materializations; it does not know which
version of a partition consumers may read, why a run was blocked, or what an
operator decided. The ledger does. It is a SQLite database in the home folder
(WAL mode, so Dagster runs, sensors and operators can write at once) whose
tables can only grow: triggers refuse every UPDATE and DELETE. State is
always *derived* from the events, so history is never lost and a withdrawal
is an event, not an edit.

Partition states (``partition_events.state``):

``BUILT``              checks passed in a run; a candidate awaiting certification
``CERTIFIED``          consumers may read this snapshot of the partition
``WITHDRAWN``          a certification was withdrawn (consumers fall back)
``BLOCKED_UPSTREAM``   a run found the source not ready and published nothing
``RESTATEMENT_PENDING`` a certified day has new source data waiting to be rebuilt
``LOAD_FAILED``        a run for the partition failed after it started publishing
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from .clock import format_ts
from ..domain.controls import ControlTuple

BUILT = "BUILT"
CERTIFIED = "CERTIFIED"
WITHDRAWN = "WITHDRAWN"
BLOCKED_UPSTREAM = "BLOCKED_UPSTREAM"
RESTATEMENT_PENDING = "RESTATEMENT_PENDING"
LOAD_FAILED = "LOAD_FAILED"

_TABLES = {
    "batches": """
        batch_id TEXT PRIMARY KEY,
        partition TEXT NOT NULL,
        schema_version TEXT NOT NULL,
        contract_applied TEXT NOT NULL,
        expected_rows INTEGER NOT NULL,
        source_seq_low INTEGER NOT NULL,
        source_seq_high INTEGER NOT NULL,
        ready_at TEXT NOT NULL,
        data_sha256 TEXT NOT NULL,
        data_file TEXT NOT NULL,
        fields_json TEXT NOT NULL,
        first_seen_at TEXT NOT NULL,
        run_id TEXT
    """,
    "partition_events": """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        asset TEXT NOT NULL,
        partition TEXT NOT NULL,
        state TEXT NOT NULL,
        snapshot_id INTEGER,
        fingerprint TEXT,
        controls_json TEXT,
        run_id TEXT,
        lane TEXT,
        actor TEXT NOT NULL,
        reason TEXT,
        detail_json TEXT,
        recorded_at TEXT NOT NULL
    """,
    "check_results": """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        asset TEXT NOT NULL,
        check_name TEXT NOT NULL,
        partition TEXT NOT NULL,
        passed INTEGER NOT NULL,
        blocking INTEGER NOT NULL,
        observed_json TEXT,
        expected_json TEXT,
        run_id TEXT,
        recorded_at TEXT NOT NULL
    """,
    "certification_holds": """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        action TEXT NOT NULL,
        hold_id INTEGER,
        assets_json TEXT,
        partition_from TEXT,
        partition_to TEXT,
        incident_id TEXT,
        actor TEXT NOT NULL,
        reason TEXT,
        at TEXT NOT NULL
    """,
    "slo_records": """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        partition TEXT NOT NULL,
        objective TEXT NOT NULL,
        value REAL,
        unit TEXT NOT NULL,
        target REAL NOT NULL,
        met INTEGER NOT NULL,
        missed_by REAL,
        detail TEXT,
        run_id TEXT,
        timeline_json TEXT,
        recorded_at TEXT NOT NULL
    """,
    "backfill_requests": """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        request_id TEXT NOT NULL,
        event TEXT NOT NULL,
        partition_from TEXT NOT NULL,
        partition_to TEXT NOT NULL,
        start_at TEXT,
        operator TEXT NOT NULL,
        reason TEXT NOT NULL,
        incident_id TEXT,
        run_id TEXT,
        dagster_backfill_id TEXT,
        success INTEGER,
        detail_json TEXT,
        at TEXT NOT NULL
    """,
    "id_allocations": """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        number INTEGER NOT NULL,
        UNIQUE (kind, number)
    """,
    "incidents": """
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL,
        opened_at TEXT NOT NULL,
        opened_by TEXT NOT NULL
    """,
    "incident_events": """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        incident_id TEXT NOT NULL,
        at TEXT NOT NULL,
        actor TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT,
        message TEXT NOT NULL,
        data_json TEXT
    """,
    "contract_approvals": """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        batch_id TEXT NOT NULL,
        partition TEXT NOT NULL,
        contract_version TEXT NOT NULL,
        owner TEXT NOT NULL,
        approved_by TEXT NOT NULL,
        reason TEXT NOT NULL,
        incident_id TEXT,
        at TEXT NOT NULL
    """,
    "dashboard_deployments": """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        dashboard TEXT NOT NULL,
        version TEXT NOT NULL,
        definition_json TEXT NOT NULL,
        deployed_by TEXT NOT NULL,
        reason TEXT NOT NULL,
        at TEXT NOT NULL
    """,
    "access_log": """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        principal TEXT NOT NULL,
        principal_kind TEXT NOT NULL,
        role TEXT NOT NULL,
        statement_sha256 TEXT NOT NULL,
        decision TEXT NOT NULL,
        reason TEXT NOT NULL,
        at TEXT NOT NULL
    """,
    "step_retries": """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        asset TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        at TEXT NOT NULL
    """,
    "run_phases": """
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        partition TEXT NOT NULL,
        phase TEXT NOT NULL,
        at TEXT NOT NULL,
        lane TEXT
    """,
}

_INDEXES = (
    "CREATE INDEX IF NOT EXISTS ix_events_asset_partition ON partition_events(asset, partition, id)",
    "CREATE INDEX IF NOT EXISTS ix_events_run ON partition_events(run_id)",
    "CREATE INDEX IF NOT EXISTS ix_checks_partition ON check_results(partition, asset, check_name, id)",
    "CREATE INDEX IF NOT EXISTS ix_checks_run ON check_results(run_id)",
    "CREATE INDEX IF NOT EXISTS ix_phases_run ON run_phases(run_id, partition)",
    "CREATE INDEX IF NOT EXISTS ix_batches_partition ON batches(partition)",
    "CREATE INDEX IF NOT EXISTS ix_incident_events ON incident_events(incident_id, id)",
)


@dataclass(frozen=True)
class PartitionEvent:
    id: int
    asset: str
    partition: str
    state: str
    snapshot_id: int | None
    fingerprint: str | None
    controls: ControlTuple | None
    run_id: str | None
    lane: str | None
    actor: str
    reason: str | None
    detail: dict
    recorded_at: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "PartitionEvent":
        return cls(
            id=row["id"],
            asset=row["asset"],
            partition=row["partition"],
            state=row["state"],
            snapshot_id=row["snapshot_id"],
            fingerprint=row["fingerprint"],
            controls=ControlTuple.from_mapping(json.loads(row["controls_json"])) if row["controls_json"] else None,
            run_id=row["run_id"],
            lane=row["lane"],
            actor=row["actor"],
            reason=row["reason"],
            detail=json.loads(row["detail_json"]) if row["detail_json"] else {},
            recorded_at=row["recorded_at"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "asset": self.asset,
            "partition": self.partition,
            "state": self.state,
            "snapshot_id": self.snapshot_id,
            "fingerprint": self.fingerprint,
            "controls": self.controls.to_json() if self.controls else None,
            "run_id": self.run_id,
            "lane": self.lane,
            "actor": self.actor,
            "reason": self.reason,
            "detail": self.detail,
            "recorded_at": self.recorded_at,
        }


@dataclass(frozen=True)
class ServedVersion:
    """The certification consumers are served for one (asset, partition)."""

    certification: PartitionEvent
    version: int  # 1 for the first certified content of the partition, 2 after a restatement, ...


def _content_version(history: list[PartitionEvent], target: PartitionEvent) -> int:
    """1 + the number of times the certified content changed up to ``target``.

    Re-certifying identical rows (same fingerprint) is not a new version: a
    replay must not look like a restatement to consumers.
    """
    version, previous = 0, None
    for event in history:
        if event.fingerprint != previous:
            version += 1
            previous = event.fingerprint
        if event.id == target.id:
            return version
    return version


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


class Ledger:
    """Append-only SQLite ledger at ``path``."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._initialised = False
        self._local = threading.local()

    # -- plumbing ---------------------------------------------------------
    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection (kept open: a connect per operation costs more than the work)."""
        if not self._initialised:
            self._initialise()
        con = getattr(self._local, "con", None)
        if con is None or getattr(self._local, "pid", None) != os.getpid():
            con = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=True)
            con.row_factory = sqlite3.Row
            con.execute("PRAGMA busy_timeout = 60000")
            self._local.con, self._local.pid = con, os.getpid()
        yield con

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group appends into one transaction (one fsync instead of one per row)."""
        with self.connect() as con:
            if con.in_transaction:
                yield
                return
            con.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def _initialise(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            con.execute("PRAGMA busy_timeout = 60000")
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("BEGIN IMMEDIATE")
            for name, columns in _TABLES.items():
                con.execute(f"CREATE TABLE IF NOT EXISTS {name} ({columns})")
                for op in ("UPDATE", "DELETE"):
                    con.execute(
                        f"CREATE TRIGGER IF NOT EXISTS {name}_no_{op.lower()} BEFORE {op} ON {name} "
                        f"BEGIN SELECT RAISE(ABORT, 'the AtlasMart ledger is append-only'); END"
                    )
            for statement in _INDEXES:
                con.execute(statement)
            con.execute("COMMIT")
        finally:
            con.close()
        self._initialised = True

    def rows(self, table: str, where: str = "", args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows of a ledger table in insertion order (``where`` is a trusted SQL predicate)."""
        with self.connect() as con:
            clause = f" WHERE {where}" if where else ""
            return [dict(r) for r in con.execute(f"SELECT * FROM {table}{clause} ORDER BY rowid", tuple(args)).fetchall()]

    def insert(self, table: str, values: dict[str, Any], ignore_duplicate: bool = False) -> int:
        """Append one row to a ledger table; returns its rowid."""
        columns = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        verb = "INSERT OR IGNORE" if ignore_duplicate else "INSERT"
        with self.connect() as con:
            cursor = con.execute(f"{verb} INTO {table} ({columns}) VALUES ({marks})", tuple(values.values()))
            return cursor.lastrowid

    # -- identifiers ------------------------------------------------------
    def allocate_id(self, kind: str) -> str:
        """The next readable id of a kind (``BF-0001``, ``INC-0001``), unique under concurrency."""
        with self.batch(), self.connect() as con:
            (last,) = con.execute(
                "SELECT coalesce(max(number), 0) FROM id_allocations WHERE kind = ?", (kind,)
            ).fetchone()
            con.execute("INSERT INTO id_allocations (kind, number) VALUES (?, ?)", (kind, last + 1))
        return f"{kind}-{last + 1:04d}"

    # -- batches ----------------------------------------------------------
    def record_batch(
        self,
        manifest: dict,
        contract_applied: str,
        fields: Sequence[str],
        first_seen_at: datetime,
        run_id: str | None,
    ) -> None:
        """Remember a committed batch (first sighting wins; re-runs add nothing)."""
        self.insert(
            "batches",
            {
                "batch_id": manifest["batch_id"],
                "partition": manifest["partition"],
                "schema_version": manifest["schema_version"],
                "contract_applied": contract_applied,
                "expected_rows": manifest["expected_rows"],
                "source_seq_low": manifest["source_seq_low"],
                "source_seq_high": manifest["source_seq_high"],
                "ready_at": manifest["ready_at"],
                "data_sha256": manifest["data_sha256"],
                "data_file": manifest["data_file"],
                "fields_json": json.dumps(sorted(fields)),
                "first_seen_at": format_ts(first_seen_at),
                "run_id": run_id,
            },
            ignore_duplicate=True,
        )

    def batches(self, partition: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM batches"
        args: tuple = ()
        if partition:
            sql += " WHERE partition = ?"
            args = (partition,)
        with self.connect() as con:
            rows = con.execute(sql + " ORDER BY partition, source_seq_low, batch_id", args).fetchall()
        return [dict(r) for r in rows]

    # -- partition events -------------------------------------------------
    def append_event(
        self,
        asset: str,
        partition: str,
        state: str,
        at: datetime,
        actor: str,
        *,
        snapshot_id: int | None = None,
        fingerprint: str | None = None,
        controls: ControlTuple | None = None,
        run_id: str | None = None,
        lane: str | None = None,
        reason: str | None = None,
        detail: dict | None = None,
    ) -> int:
        return self.insert(
            "partition_events",
            {
                "asset": asset,
                "partition": partition,
                "state": state,
                "snapshot_id": snapshot_id,
                "fingerprint": fingerprint,
                "controls_json": _dumps(controls.to_json()) if controls else None,
                "run_id": run_id,
                "lane": lane,
                "actor": actor,
                "reason": reason,
                "detail_json": _dumps(detail),
                "recorded_at": format_ts(at),
            },
        )

    def events(
        self,
        asset: str | None = None,
        partition: str | None = None,
        states: Iterable[str] | None = None,
        run_id: str | None = None,
        assets: Iterable[str] | None = None,
        partitions: Iterable[str] | None = None,
    ) -> list[PartitionEvent]:
        clauses, args = [], []
        for column, value in (("asset", asset), ("partition", partition), ("run_id", run_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        for column, values in (("state", states), ("asset", assets), ("partition", partitions)):
            if values is not None:
                values = list(values)
                clauses.append(f"{column} IN ({', '.join('?' for _ in values)})")
                args.extend(values)
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        with self.connect() as con:
            rows = con.execute(f"SELECT * FROM partition_events{where} ORDER BY id", args).fetchall()
        return [PartitionEvent.from_row(r) for r in rows]

    def served(self, asset: str, partition: str) -> ServedVersion | None:
        """The newest certification of (asset, partition) that was not withdrawn."""
        return self.served_map(asset).get(partition)

    def served_map(self, asset: str) -> dict[str, ServedVersion]:
        """Served certification per partition of ``asset``."""
        served: dict[str, ServedVersion] = {}
        certs: dict[str, list[PartitionEvent]] = {}
        withdrawn: set[int] = set()
        for event in self.events(asset=asset, states=(CERTIFIED, WITHDRAWN)):
            if event.state == CERTIFIED:
                certs.setdefault(event.partition, []).append(event)
            else:
                withdrawn.update(event.detail.get("certification_ids", []))
        for partition, history in certs.items():
            live = [e for e in history if e.id not in withdrawn]
            if live:
                newest = live[-1]
                served[partition] = ServedVersion(newest, version=_content_version(history, newest))
        return served

    # -- checks -----------------------------------------------------------
    def record_check(
        self,
        asset: str,
        check_name: str,
        partition: str,
        passed: bool,
        blocking: bool,
        at: datetime,
        run_id: str | None,
        observed: Any = None,
        expected: Any = None,
    ) -> int:
        return self.insert(
            "check_results",
            {
                "asset": asset,
                "check_name": check_name,
                "partition": partition,
                "passed": int(passed),
                "blocking": int(blocking),
                "observed_json": _dumps(observed),
                "expected_json": _dumps(expected),
                "run_id": run_id,
                "recorded_at": format_ts(at),
            },
        )

    def check_results(
        self,
        run_id: str | None = None,
        partition: str | None = None,
        asset: str | None = None,
        partitions: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        clauses, args = [], []
        for column, value in (("run_id", run_id), ("partition", partition), ("asset", asset)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        if partitions is not None:
            partitions = list(partitions)
            clauses.append(f"partition IN ({', '.join('?' for _ in partitions)})")
            args.extend(partitions)
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        with self.connect() as con:
            rows = con.execute(f"SELECT * FROM check_results{where} ORDER BY id", args).fetchall()
        out = []
        for row in rows:
            item = dict(row)
            item["passed"] = bool(item["passed"])
            item["blocking"] = bool(item["blocking"])
            item["observed"] = json.loads(item.pop("observed_json") or "null")
            item["expected"] = json.loads(item.pop("expected_json") or "null")
            out.append(item)
        return out

    # -- certification holds (containment) -------------------------------
    def hold(
        self,
        assets: Sequence[str],
        partition_from: str,
        partition_to: str,
        actor: str,
        reason: str,
        at: datetime,
        incident_id: str | None = None,
    ) -> int:
        """Stop certification of ``assets`` for the partition range until released."""
        return self.insert(
            "certification_holds",
            {
                "action": "HOLD",
                "assets_json": json.dumps(sorted(assets)),
                "partition_from": partition_from,
                "partition_to": partition_to,
                "incident_id": incident_id,
                "actor": actor,
                "reason": reason,
                "at": format_ts(at),
            },
        )

    def release(self, hold_id: int, actor: str, reason: str, at: datetime) -> int:
        return self.insert(
            "certification_holds",
            {"action": "RELEASE", "hold_id": hold_id, "actor": actor, "reason": reason, "at": format_ts(at)},
        )

    def active_holds(self) -> list[dict[str, Any]]:
        with self.connect() as con:
            rows = [dict(r) for r in con.execute("SELECT * FROM certification_holds ORDER BY id").fetchall()]
        released = {r["hold_id"] for r in rows if r["action"] == "RELEASE"}
        active = []
        for row in rows:
            if row["action"] == "HOLD" and row["id"] not in released:
                row["assets"] = json.loads(row.pop("assets_json"))
                active.append(row)
        return active

    def active_hold(self, asset: str, partition: str) -> dict[str, Any] | None:
        return covering_hold(self.active_holds(), asset, partition)

    # -- SLOs -------------------------------------------------------------
    def record_slo(self, result: Any, run_id: str, timeline: dict, at: datetime) -> int:
        return self.insert(
            "slo_records",
            {
                "partition": result.partition,
                "objective": result.objective,
                "value": result.value,
                "unit": result.unit,
                "target": result.target,
                "met": int(result.met),
                "missed_by": result.missed_by,
                "detail": result.detail,
                "run_id": run_id,
                "timeline_json": json.dumps(timeline, sort_keys=True),
                "recorded_at": format_ts(at),
            },
        )

    def slo_records(self, partition: str | None = None) -> list[dict[str, Any]]:
        rows = self.rows("slo_records", "partition = ?", (partition,)) if partition else self.rows("slo_records")
        for row in rows:
            row["met"] = bool(row["met"])
            row["timeline"] = json.loads(row.pop("timeline_json") or "{}")
        return rows

    # -- backfill requests ------------------------------------------------
    def record_backfill(self, request_id: str, event: str, request: dict, at: datetime, **outcome: Any) -> int:
        """Append one event (REQUESTED, SUBMITTED, FINISHED) of an operator's backfill request."""
        return self.insert(
            "backfill_requests",
            {
                "request_id": request_id,
                "event": event,
                "partition_from": request["start"],
                "partition_to": request["end"],
                "start_at": request.get("start_at"),
                "operator": request["operator"],
                "reason": request["reason"],
                "incident_id": request.get("incident_id"),
                "run_id": outcome.get("run_id"),
                "dagster_backfill_id": outcome.get("dagster_backfill_id"),
                "success": None if outcome.get("success") is None else int(outcome["success"]),
                "detail_json": _dumps(outcome.get("detail")),
                "at": format_ts(at),
            },
        )

    def backfills(self) -> list[dict[str, Any]]:
        rows = self.rows("backfill_requests")
        for row in rows:
            row["detail"] = json.loads(row.pop("detail_json") or "null")
        return rows

    # -- run phases -------------------------------------------------------
    def record_phase(self, run_id: str, partition: str, phase: str, at: datetime, lane: str | None) -> None:
        self.insert(
            "run_phases",
            {"run_id": run_id, "partition": partition, "phase": phase, "at": format_ts(at), "lane": lane},
        )

    def phases(self, run_id: str | None = None, partition: str | None = None) -> list[dict[str, Any]]:
        clauses, args = [], []
        for column, value in (("run_id", run_id), ("partition", partition)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        with self.connect() as con:
            rows = con.execute(f"SELECT * FROM run_phases{where} ORDER BY id", args).fetchall()
        return [dict(r) for r in rows]


def covering_hold(holds: Iterable[dict[str, Any]], asset: str, partition: str) -> dict[str, Any] | None:
    """The first of ``holds`` (see ``Ledger.active_holds``) that covers (asset, partition)."""
    for hold in holds:
        if asset in hold["assets"] and hold["partition_from"] <= partition <= hold["partition_to"]:
            return hold
    return None
