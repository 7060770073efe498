"""Drill: raw evidence loss. The stored raw copy of an accepted batch is deleted; nothing may paper over it.

On a scratch home with the bundled sample, each step observes something and
reports PASS or FAIL with what it saw (a step that raises is a FAIL with the
error as its evidence):

1. ``baseline``: load and certify history and the day (in a run of its own);
   record the day's published data file hashes (every layer), the certified
   fingerprints, versions and first-served times.
2. ``backup``: ``atlasmart backup``; the backup holds the batch's raw copy.
3. ``delete_raw``: delete the stored raw copy of the day's accepted batch
   (the ledger still lists it, the landing zone still holds the day).
4. ``verify_fails``: ``atlasmart verify`` fails, naming the batch.
5. ``incident_opened``: the incident sensor's detection opens one
   'Raw evidence lost' incident naming the batch.
6. ``backfill_refuses``: a backfill of the day fails, naming the batch and
   ``atlasmart restore``; the raw folder is not re-created from the landing
   zone; consumers keep the certified version.
7. ``restore``: ``atlasmart restore`` of the backup brings the batch back,
   hashing to the ledger's data_sha256.
8. ``verify_passes``: ``atlasmart verify`` is clean.
9. ``recertified_identical``: a backfill of the day succeeds and
   re-certifies it: byte-identical data files, the same fingerprints, the
   same certified version and first-served time.
"""

from __future__ import annotations

import hashlib
import shutil
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..ops import recovery
from ..ops.runs.backfills import BackfillRequest, run_backfill
from ..ops.response.incidents.detection import detect
from ..store.ledger.incidents import IncidentStore
from ..ops.runs.chains import run_reference
from ..product.serving import partition_status
from ..store.tables import (
    AGG_DAILY_SALES,
    CERTIFIED_ASSETS,
    FACT_SALES,
    MART_EXECUTIVE_REVENUE,
    MART_FINANCE_DAILY_SALES,
    METRIC_GROSS_REVENUE,
    STG_ORDER_LINES,
)
from .harness import DrillWorld, hhmm, write_json

NAME = "raw-evidence-loss"
HISTORY = ["2026-09-17", "2026-09-18", "2026-09-19"]
DAY = "2026-09-20"  # the day whose raw evidence is lost
LAYERS = (STG_ORDER_LINES, FACT_SALES, AGG_DAILY_SALES, METRIC_GROSS_REVENUE, MART_FINANCE_DAILY_SALES,
          MART_EXECUTIVE_REVENUE)
OPERATOR = "on-call data engineer (drill)"

NOT_PROVEN = [
    "a restore rolls the ledger back to the backup: the 'Raw evidence lost' incident and the refused backfill "
    "recorded after the backup are not in the restored ledger (they stay in the home moved aside)",
    "an object-store raw store (a batch lost from a bucket): this drill deletes the embedded home's folder",
    "a batch accepted after the last backup: its raw copy cannot be restored from that backup",
]


@dataclass
class Step:
    name: str
    ok: bool
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "result": "PASS" if self.ok else "FAIL", "message": self.message,
                "evidence": self.evidence}


class RawEvidenceLossDrill:
    """The world and what the steps recorded for the ones after them."""

    def __init__(self, workdir: Path, ephemeral_instance: bool = False, log_level: str | None = "CRITICAL"):
        self.workdir = Path(workdir)
        self.world = DrillWorld(self.workdir / "world", ephemeral_instance, log_level)
        self.baseline: dict[str, Any] = {}
        self.backup: dict[str, Any] = {}
        self.batch: dict[str, Any] = {}  # the ledger's record of the day's accepted batch
        self.raw_folder: Path | None = None

    def backfill(self, label: str, reason: str):
        request = BackfillRequest(start=DAY, end=DAY, operator=OPERATOR, reason=reason)
        outcome = run_backfill(self.world.defs, self.world.instance, self.world.platform, request,
                               log_level=self.world.log_level)
        self.world.record_run(label, outcome)
        return outcome


def day_record(world: DrillWorld) -> dict[str, Any]:
    """What consumers are served for DAY, and the SHA-256 of every layer's data files of it."""
    platform = world.platform
    files = {spec.name: sorted(hashlib.sha256(Path(f).read_bytes()).hexdigest()
                               for f in platform.warehouse.data_files(spec, [DAY]))
             for spec in LAYERS}
    served = {}
    day = platform.ledger.partitions.states([DAY])  # one read of the day (DayStates)
    for asset in CERTIFIED_ASSETS:
        s = day.served(asset, DAY)
        served[asset] = None if s is None else {"version": s.version, "fingerprint": s.certification.fingerprint,
                                                "certified_at": s.certified_at}
    return {"file_sha256": files, "served": served, "state": partition_status(platform, DAY).state}


def _held(drill: RawEvidenceLossDrill) -> bool:
    return drill.world.platform.raw_store.holds(DAY, drill.batch["batch_id"])


def step_baseline(drill: RawEvidenceLossDrill) -> Step:
    w = drill.world
    w.at("2026-09-23T06:00:00Z")
    run_reference(w.defs, w.instance, w.log_level)
    history = w.run("load and certify the history", HISTORY, lane="backfill")
    w.certify(history)
    # The day in a run of its own, as the daily load and a backfill of one day write it: a range run writes
    # each day's Parquet through another path (same rows and fingerprints, other bytes).
    load = w.run(f"load and certify {DAY}", [DAY], lane="backfill")
    w.certify(load)
    batches = w.platform.ledger.batches.list(DAY)
    record = day_record(w)
    drill.baseline = record
    if len(batches) == 1:
        drill.batch = batches[0]
    served = record["served"]
    ok = (history.success and load.success and len(batches) == 1 and _held(drill) and record["state"] == "CERTIFIED"
          and all(served.values()) and all(record["file_sha256"].values()))
    return Step("baseline", ok, f"{DAY} {record['state']}, batch {', '.join(b['batch_id'] for b in batches)}, "
                                f"versions {sorted({v['version'] for v in served.values() if v})}",
                {"run_success": history.success and load.success, "batches": [b["batch_id"] for b in batches], **record})


def step_backup(drill: RawEvidenceLossDrill) -> Step:
    w = drill.world
    w.at("2026-09-23T06:10:00Z")
    manifest = recovery.backup(w.platform, w.root / "backups")  # wiped with the world
    drill.backup = manifest
    stored = w.platform.raw_store.get(DAY, drill.batch["batch_id"])
    raw_rel = str(stored.data_path.resolve().relative_to(w.platform.home.root))
    in_backup = [f for f in manifest["files"] if f["path"] == raw_rel]
    ok = len(in_backup) == 1 and in_backup[0]["sha256"] == drill.batch["data_sha256"]
    return Step("backup", ok, f"backup {manifest['backup_id']}: {len(manifest['files'])} files; holds {raw_rel}: "
                              f"{bool(in_backup)}", {"backup_id": manifest["backup_id"], "raw_file": raw_rel,
                                                     "raw_in_backup": in_backup})


def step_delete_raw(drill: RawEvidenceLossDrill) -> Step:
    w = drill.world
    w.at("2026-09-23T07:00:00Z")
    stored = w.platform.raw_store.get(DAY, drill.batch["batch_id"])
    folder = stored.data_path.parent
    drill.raw_folder = folder
    for f in folder.iterdir():
        f.chmod(0o644)  # the raw store writes its files read-only
    shutil.rmtree(folder)
    still_accepted = any(b["batch_id"] == drill.batch["batch_id"] for b in w.platform.ledger.batches.list(DAY))
    landing = w.platform.landing.manifest_path(DAY).exists()
    ok = not folder.exists() and not _held(drill) and still_accepted and landing
    return Step("delete_raw", ok, f"deleted {folder.relative_to(w.platform.home.root)}; the ledger still lists "
                                  f"{drill.batch['batch_id']}: {still_accepted}; the landing zone holds {DAY}: {landing}",
                {"folder": str(folder.relative_to(w.platform.home.root)), "ledger_lists_batch": still_accepted,
                 "landing_holds_day": landing})


def step_verify_fails(drill: RawEvidenceLossDrill) -> Step:
    result = recovery.verify(drill.world.platform)
    batch_id = drill.batch["batch_id"]
    naming = [f for f in result["findings"] if f["kind"] == "raw_missing" and f["partition"] == DAY
              and batch_id in f["message"]]
    ok = not result["ok"] and not result["certified_ok"] and len(naming) == 1
    return Step("verify_fails", ok, f"verify {'ok' if result['ok'] else 'FAILED'}: {'; '.join(result['problems'])}",
                {"ok": result["ok"], "problems": result["problems"], "naming_the_batch": naming})


def step_incident_opened(drill: RawEvidenceLossDrill) -> Step:
    w = drill.world
    w.at("2026-09-23T07:01:00Z")
    touched = detect(w.platform, w.instance)
    store = IncidentStore(w.platform.ledger)
    incidents = [store.get(i) for i in touched]
    lost = [i for i in incidents if "raw evidence lost" in i.title.lower() and drill.batch["batch_id"] in i.title]
    again = detect(w.platform, w.instance)  # a second tick adds nothing
    ok = len(lost) == 1 and DAY in lost[0].partitions and again == []
    return Step("incident_opened", ok, "; ".join(f"{i.id} {i.title}" for i in incidents) or "no incident opened",
                {"opened": [{"id": i.id, "title": i.title, "partitions": i.partitions} for i in incidents],
                 "second_tick": again})


def step_backfill_refuses(drill: RawEvidenceLossDrill) -> Step:
    w = drill.world
    w.at("2026-09-23T07:05:00Z")
    absent_before = not _held(drill)
    outcome = drill.backfill("backfill of the day (raw copy lost)", "rebuild the day after its raw copy was lost")
    batch_id = drill.batch["batch_id"]
    naming = [m for m in outcome.failures if batch_id in m and "atlasmart restore" in m]
    recreated = drill.raw_folder.exists() or _held(drill)
    still_served = day_record(w)["served"] == drill.baseline["served"]
    ok = absent_before and not outcome.success and bool(naming) and not recreated and still_served
    return Step("backfill_refuses", ok,
                f"backfill {'succeeded' if outcome.success else 'refused'}; raw folder re-created: {recreated}; "
                f"consumers keep the certified version: {still_served}" + (f"; {naming[0]}" if naming else ""),
                {"batch_absent_before": absent_before, "success": outcome.success, "failures": outcome.failures,
                 "naming_batch_and_restore": naming, "raw_folder_recreated": recreated,
                 "certified_version_still_served": still_served})


def step_restore(drill: RawEvidenceLossDrill) -> Step:
    w = drill.world
    w.at("2026-09-23T07:10:00Z")
    restored = recovery.restore(Path(drill.backup["path"]), w.platform.home, w.clock.now())
    w.reopen()  # the home's files were swapped
    stored = w.platform.raw_store.get(DAY, drill.batch["batch_id"])
    sha = w.platform.raw_store.stored_sha256(stored) if stored is not None else None
    ok = restored["backup_id"] == drill.backup["backup_id"] and sha == drill.batch["data_sha256"]
    # Not a criterion, told in NOT_PROVEN: the restored ledger is the backup's, from before the loss.
    restored["open_incidents_after_restore"] = [i.id for i in IncidentStore(w.platform.ledger).open_incidents()]
    return Step("restore", ok, f"restored {restored['restored_files']} files from {restored['backup_id']}; "
                               f"{drill.batch['batch_id']} back, hashing to the ledger's data_sha256: "
                               f"{sha == drill.batch['data_sha256']}",
                {k: v for k, v in restored.items() if k != "aside"} | {"batch_sha256": sha})


def step_verify_passes(drill: RawEvidenceLossDrill) -> Step:
    result = recovery.verify(drill.world.platform)
    return Step("verify_passes", result["ok"], f"verify {'ok' if result['ok'] else 'FAILED'}"
                + (f": {'; '.join(result['problems'])}" if result["problems"] else ""),
                {"ok": result["ok"], "problems": result["problems"], "checked": result["checked"]})


def step_recertified_identical(drill: RawEvidenceLossDrill) -> Step:
    w = drill.world
    w.at("2026-09-23T07:20:00Z")
    outcome = drill.backfill("re-run of the day after the restore", "re-certify the day from its restored raw batch")
    record = day_record(w)
    raw_built = w.platform.ledger.partitions.states([DAY]).events(asset="raw_order_lines", day=DAY)[-1]
    from_raw = raw_built.run_id == outcome.run_id and drill.batch["batch_id"] in (raw_built.detail.get("batch_ids") or [])
    base = drill.baseline
    same_files = record["file_sha256"] == base["file_sha256"]
    same_served = record["served"] == base["served"]
    recertified = sorted(d.asset for d in outcome.decisions if d.certified and d.partition == DAY)
    ok = (outcome.success and from_raw and recertified == sorted(CERTIFIED_ASSETS) and same_files and same_served
          and record["state"] == "CERTIFIED")
    return Step("recertified_identical", ok,
                f"re-run {'succeeded' if outcome.success else 'FAILED'}; re-certified {', '.join(recertified) or '-'}; "
                f"data files byte-identical: {same_files}; fingerprints, versions and first-served times the same: "
                f"{same_served}",
                {"success": outcome.success, "failures": outcome.failures, "built_from_batch": from_raw,
                 "recertified": recertified, "files_identical": same_files, "served_identical": same_served,
                 "after": record})


# The steps in the order they are played, each a function of the drill returning what it saw.
STEPS = (step_baseline, step_backup, step_delete_raw, step_verify_fails, step_incident_opened,
         step_backfill_refuses, step_restore, step_verify_passes, step_recertified_identical)


def run_drill(workdir: Path, ephemeral_instance: bool = False, log_level: str | None = "CRITICAL") -> dict[str, Any]:
    drill = RawEvidenceLossDrill(workdir, ephemeral_instance, log_level)
    steps: list[Step] = []
    for play in STEPS:
        name = play.__name__.removeprefix("step_")
        try:
            step = play(drill)
        except Exception as exc:  # noqa: BLE001 - a step that cannot be played is a failed step, with why
            step = Step(name, False, f"raised {type(exc).__name__}: {exc}",
                        {"traceback": traceback.format_exc().splitlines()[-6:]})
        steps.append(step)
        drill.world.signal(name, f"{'PASS' if step.ok else 'FAIL'}  {step.message}")
    acceptance = {s.name: s.ok for s in steps}
    summary = {
        "drill": NAME,
        "partition": DAY,
        "batch_id": drill.batch.get("batch_id"),
        "steps": [s.to_json() for s in steps],
        "not_proven": NOT_PROVEN,
        "acceptance": acceptance,
        "passed": all(acceptance.values()),
    }
    artifacts = Path(workdir) / "artifacts"
    write_json(artifacts / "acceptance_summary.json", summary)
    write_json(artifacts / "evidence" / "signals.json", [s.to_json() for s in drill.world.signals])
    write_json(artifacts / "evidence" / "runs.json", drill.world.runs)
    (artifacts / "raw_evidence_loss_report.md").write_text(report(summary, drill.world))
    summary["_text"] = "\n".join([f"  {hhmm(s.at)}  {s.kind:<22} {s.message}" for s in drill.world.signals]
                                 + ["", "What this drill does not prove:"] + [f"  - {n}" for n in NOT_PROVEN])
    return summary


def report(summary: dict[str, Any], world: DrillWorld) -> str:
    lines = [f"# Raw evidence loss drill ({summary['partition']}, batch {summary['batch_id']})", "",
             "| step | time | result | what was seen |", "|---|---|---|---|"]
    times = {s.kind: hhmm(s.at) for s in world.signals}
    lines += [f"| {s['name']} | {times.get(s['name'], '')} | {s['result']} | {s['message']} |" for s in summary["steps"]]
    lines += ["", "## What this drill does not prove", ""] + [f"- {n}" for n in summary["not_proven"]]
    return "\n".join(lines) + "\n"
