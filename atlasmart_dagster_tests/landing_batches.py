"""Helpers that play the ERP: write batches and manifests into a test landing zone."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def read_rows(day_dir: Path, name: str = "order_lines.jsonl") -> list[dict]:
    return [json.loads(line) for line in (day_dir / name).read_text().splitlines() if line.strip()]


def read_manifest(day_dir: Path) -> dict:
    return json.loads((day_dir / "_manifest.json").read_text())


def write_batch(day_dir: Path, rows: list[dict] | None = None, data: bytes | None = None,
                name: str = "order_lines.jsonl", **manifest_overrides) -> dict:
    """Write a data file and a truthful manifest (then apply overrides, which may lie)."""
    day_dir.mkdir(parents=True, exist_ok=True)
    old = read_manifest(day_dir) if (day_dir / "_manifest.json").exists() else {}
    if data is None:
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    (day_dir / name).write_bytes(data)
    seqs = [r["source_seq"] for r in rows or [] if isinstance(r.get("source_seq"), int)]
    manifest = {
        "source_system": "atlasmart_erp",
        "partition": day_dir.name.removeprefix("sales_date="),
        "batch_id": old.get("batch_id", "ERP-TEST-01"),
        "schema_version": "v1",
        "expected_rows": len(rows) if rows is not None else data.count(b"\n"),
        "source_seq_low": min(seqs) if seqs else old.get("source_seq_low", 0),
        "source_seq_high": max(seqs) if seqs else old.get("source_seq_high", 0),
        "ready_at": old.get("ready_at", "2026-09-22T08:04:00Z"),
        "data_file": name,
        "data_sha256": hashlib.sha256(data).hexdigest(),
    }
    manifest.update(manifest_overrides)
    (day_dir / "_manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def patch_manifest(day_dir: Path, **changes) -> dict:
    manifest = read_manifest(day_dir)
    manifest.update(changes)
    (day_dir / "_manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest
