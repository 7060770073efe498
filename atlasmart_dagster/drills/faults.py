"""Faults that drills inject on purpose, each the smallest honest imitation of a real failure.

Three kinds: a bad publish (``corrupt_aggregate_cost``), a source that
changes what it delivers (``drift_rename_field``), and a transient failure of
a step that the retry policy must absorb (``transient_faults_by_tag``, through
the step-start seam of ``defs/assets/step.py``; production registers nothing).
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from ..defs.assets.step import STEP_START_HOOKS, Step
from ..errors import InjectedTransientError
from ..store.platform import Platform
from ..store.tables import AGG_DAILY_SALES

# A run tagged with asset names (comma-separated) fails the first attempt of those steps.
INJECT_TRANSIENT_TAG = "atlasmart/inject_transient"


def corrupt_aggregate_cost(platform: Platform, partition: str, delta_usd: int) -> int:
    """Publish a bad version of agg_daily_sales for one day: cost off by ``delta_usd``.

    Imitates a buggy write of the aggregate (profit moves with the cost, as a
    plausible bug would keep the row internally consistent). Returns the
    snapshot id of the bad version.
    """
    rows = platform.warehouse.read(AGG_DAILY_SALES, [partition]).to_pylist()
    if not rows:
        raise ValueError(f"agg_daily_sales has no row for {partition} to corrupt")
    for row in rows:
        row["cost_usd"] += delta_usd
        row["gross_profit_usd"] -= delta_usd
    bad = pa.Table.from_pylist(rows, AGG_DAILY_SALES.arrow_schema())
    return platform.warehouse.overwrite(AGG_DAILY_SALES, bad, [partition], {"run_id": "drill-fault", "fault": "cost"})


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


def inject_transient_by_tag(step: Step) -> None:
    """Fail the first attempt of a step whose asset the run names in ``INJECT_TRANSIENT_TAG``."""
    targets = {t.strip() for t in step.tags.get(INJECT_TRANSIENT_TAG, "").split(",") if t.strip()}
    retry = step.context.retry_number
    if step.asset in targets and retry == 0:
        raise InjectedTransientError(
            f"injected transient failure in {step.asset} (attempt {retry + 1}); the retry policy should recover"
        )


@contextmanager
def transient_faults_by_tag() -> Iterator[None]:
    """While open, runs in this process honour ``INJECT_TRANSIENT_TAG``."""
    STEP_START_HOOKS.append(inject_transient_by_tag)
    try:
        yield
    finally:
        STEP_START_HOOKS.remove(inject_transient_by_tag)
