"""How drills change what the ERP delivers (the data file, and a manifest that still tells the truth)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def drift_rename_field(day_dir: Path, manifest_path: Path, old: str, new: str) -> dict:
    """Rename a field in every row of the day's JSON Lines file; keep the manifest truthful (hash, rows)."""
    manifest = json.loads(manifest_path.read_text())
    data_path = day_dir / manifest["data_file"]
    rows = [json.loads(line) for line in data_path.read_text().splitlines() if line.strip()]
    renamed = [{(new if k == old else k): v for k, v in row.items()} for row in rows]
    data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in renamed).encode()
    data_path.write_bytes(data)
    manifest["data_sha256"] = hashlib.sha256(data).hexdigest()
    manifest_path.write_text(json.dumps(manifest, indent=2))
    return manifest
