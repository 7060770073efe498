"""Drill: disaster recovery. A restore that was never tested is a hypothesis; this one is tested.

1. Load the sample and certify it; fingerprint every fact row in canonical order.
2. Back up the home (committed state only).
3. Damage the primary: delete the fact rows of orders O1004 and O1005.
4. Detect it with ``verify``.
5. Restore the backup; prove the controls and the fact-row SHA-256 are back.
6. Damage the same day again and repair it without a full restore: roll
   fact_sales 2026-09-20 back to the version its certification was built on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyiceberg.expressions import In

from ..domain.controls import FACT_CONTROLS_SQL, ControlTuple, controls_by_date, total
from ..ops import recovery
from ..ops.runs.chains import run_reference
from ..product.canonical_controls import canonical_controls
from ..product.published_controls import fingerprints_of
from ..store.platform import Platform
from ..store.tables import FACT_SALES
from ..store.warehouse import duckdb_connection
from .harness import DrillWorld, hhmm, write_json

DAYS = ["2026-09-17", "2026-09-18", "2026-09-19", "2026-09-20", "2026-09-21"]
DAMAGED_ORDERS = ["O1004", "O1005"]
ROLLBACK_DAY = "2026-09-20"

NOT_PROVEN = [
    "object-store or catalog-service recovery: the embedded home is a local folder and a SQLite catalog; a "
    "Postgres/REST catalog and an object store need their own backup (point-in-time recovery, versioned buckets)",
    "key management: nothing here is encrypted, so no keys are backed up or rotated",
    "BI exports and dashboard caches outside the platform: consumers' copies are not restored; they are told "
    "through notices",
    "relocation: this drill restores into the home path the backup came from; a backup restored at another path "
    "(restore --relocate) or a copied home (atlasmart relocate) is proven by its own tests, not here",
    "the Dagster instance (run history): it is operational history, not the data product, and is not backed up",
]


def _delete_orders(platform: Platform) -> None:
    platform.warehouse.table(FACT_SALES).delete(In("order_id", DAMAGED_ORDERS))


def _controls_without(platform: Platform, orders: list[str]) -> ControlTuple:
    """Total fact controls without ``orders``' rows: what deleting them must leave behind."""
    con = duckdb_connection()
    try:
        view = platform.warehouse.register(con, FACT_SALES, name="dr_fact")
        listed = ", ".join(f"'{o}'" for o in orders)
        kept = f"(SELECT * FROM {view} WHERE order_id NOT IN ({listed}))"
        return total(controls_by_date(con, FACT_CONTROLS_SQL, kept).values())
    finally:
        con.close()


def run_drill(workdir: Path, ephemeral_instance: bool = False, log_level: str | None = "CRITICAL") -> dict[str, Any]:
    world = DrillWorld(Path(workdir) / "world", ephemeral_instance, log_level)
    world.at("2026-09-23T06:00:00Z")
    run_reference(world.defs, world.instance, log_level)
    load = world.run("load and certify the sample", DAYS, lane="backfill")
    world.certify(load)
    platform = world.platform
    sha_before = recovery.fact_rows_sha256(platform)
    controls_before = recovery.total_fact_controls(platform)
    # What the facts must hold, recomputed from raw through the contract rules.
    canonical = total(canonical_controls(platform, DAYS).values())
    world.signal("baseline", f"fact rows SHA-256 {sha_before[:16]}…, controls {controls_before}")

    world.at("2026-09-23T06:10:00Z")
    manifest = recovery.backup(platform, world.root / "backups")  # wiped with the world on the next run
    world.signal("backup", f"backup {manifest['backup_id']}: {len(manifest['files'])} files, "
                           f"{len(manifest['tables'])} tables, committed state only")

    world.at("2026-09-23T07:00:00Z")
    expected_damage = _controls_without(platform, DAMAGED_ORDERS)
    _delete_orders(platform)
    controls_damaged = recovery.total_fact_controls(platform)
    world.signal("damage", f"fact rows of {', '.join(DAMAGED_ORDERS)} deleted from the primary: {controls_damaged}")
    detected = recovery.verify(platform)
    world.signal("detected", f"verify: {'ok' if detected['ok'] else 'FAILED'}: " + "; ".join(detected["problems"]))

    world.at("2026-09-23T07:10:00Z")
    restored = recovery.restore(Path(manifest["path"]), platform.home, world.clock.now())
    world.reopen()  # the files under the platform changed
    platform = world.platform
    after = recovery.verify(platform)
    sha_after = recovery.fact_rows_sha256(platform)
    controls_after = recovery.total_fact_controls(platform)
    world.signal("restored", f"restored {restored['restored_files']} files; verify {'ok' if after['ok'] else 'FAILED'}; "
                             f"controls {controls_after}; fact SHA-256 equal: {sha_after == sha_before}")

    world.at("2026-09-23T08:00:00Z")
    neighbours = [d for d in DAYS if d != ROLLBACK_DAY]
    others_before = fingerprints_of(platform.warehouse, FACT_SALES, neighbours)
    _delete_orders(platform)
    damaged_again = recovery.total_fact_controls(platform)
    rollback = recovery.rollback_partition(platform, FACT_SALES.name, ROLLBACK_DAY, "dr drill operator",
                                           "orders O1004/O1005 deleted by mistake")
    rolled = recovery.total_fact_controls(platform)
    sha_rolled = recovery.fact_rows_sha256(platform)
    others_after = fingerprints_of(platform.warehouse, FACT_SALES, neighbours)
    world.signal("rollback", f"damaged again {damaged_again}; rolled {FACT_SALES.name} {ROLLBACK_DAY} back to its "
                             f"certified version ({rollback['rows']} rows): {rolled}; fact SHA-256 equal: "
                             f"{sha_rolled == sha_before}; other days untouched: {others_before == others_after}")
    final = recovery.verify(platform)

    acceptance = {
        "baseline_controls": controls_before == canonical,
        "damage_controls": controls_damaged == expected_damage != controls_before,
        "verify_detects_damage": not detected["ok"] and any(ROLLBACK_DAY in p for p in detected["problems"]),
        "restore_verified": after["ok"],
        "restored_controls": controls_after == controls_before,
        "fact_sha256_equal_after_restore": sha_after == sha_before,
        "partition_rollback_restores_controls": rolled == controls_before and sha_rolled == sha_before,
        "partition_rollback_leaves_other_days": others_before == others_after,
        "final_verify_ok": final["ok"],
    }
    summary = {
        "drill": "dr",
        "fact_sha256_before": sha_before,
        "fact_sha256_after_restore": sha_after,
        "controls": {"before": str(controls_before), "damaged": str(controls_damaged), "restored": str(controls_after),
                     "damaged_again": str(damaged_again), "rolled_back": str(rolled)},
        "backup": {"id": manifest["backup_id"], "files": len(manifest["files"]), "tables": sorted(manifest["tables"])},
        "detected_problems": detected["problems"],
        "restore": {k: v for k, v in restored.items() if k != "aside"},
        "rollback": {k: v for k, v in rollback.items() if "snapshot" not in k},
        "not_proven": NOT_PROVEN,
        "acceptance": acceptance,
        "passed": all(acceptance.values()),
    }
    artifacts = Path(workdir) / "artifacts"
    write_json(artifacts / "acceptance_summary.json", summary)
    write_json(artifacts / "evidence" / "signals.json", [s.to_json() for s in world.signals])
    (artifacts / "dr_report.md").write_text(report(summary, world))
    summary["_text"] = "\n".join([f"  {hhmm(s.at)}  {s.kind:<9} {s.message}" for s in world.signals]
                                 + ["", "What this drill does not prove:"] + [f"  - {n}" for n in NOT_PROVEN])
    return summary


def report(summary: dict[str, Any], world: DrillWorld) -> str:
    lines = ["# Disaster recovery drill", "", "| step | result |", "|---|---|"]
    lines += [f"| {s.kind} ({hhmm(s.at)}) | {s.message} |" for s in world.signals]
    lines += ["", "## What this drill does not prove", ""] + [f"- {n}" for n in summary["not_proven"]]
    return "\n".join(lines) + "\n"
