"""A day built alone is the same day built inside a range: the same data files (names and bytes), the same
fingerprint and the same certified version, in every layer (issue 34, "what must not change").

Home ``range`` loads a generated landing zone in one single-run backfill over every day; home ``alone``
loads the first, a middle and the last day each in a run of its own; home ``one`` loads the middle day
as a range of one day. Days are independent (every window partitions by day), so a day alone in an empty
home has exactly the inputs it has inside the range.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from atlasmart_dagster.bench.generator import generate
from atlasmart_dagster.defs.automation.jobs import backfill_sales_job
from atlasmart_dagster.defs.partitions import range_tags
from atlasmart_dagster.defs.resources import AtlasmartResource
from atlasmart_dagster.ops.runs import run_chain
from atlasmart_dagster.product.lanes import BACKFILL, LANE_TAG
from atlasmart_dagster.product.run_certification import certify_run
from atlasmart_dagster.store.tables import DAILY_CHAIN, REGISTRY

ROWS_PER_DAY = 2_000
DAILY_SPECS = [REGISTRY.spec(name) for name in DAILY_CHAIN]


class Home:
    """One home loading the generated landing zone, with its own Dagster instance."""

    def __init__(self, root: Path, landing: Path):
        from atlasmart_dagster.definitions import build_definitions

        self.resource = AtlasmartResource(home=str(root), landing=str(landing))
        self.platform = self.resource.platform
        self.defs = build_definitions(self.resource)
        self.instance = dg.DagsterInstance.ephemeral()

    def load(self, days: list[str]) -> None:
        outcome = run_chain(self.defs, self.instance, self.platform, days, lane=BACKFILL)
        assert outcome.success and outcome.certified == days, outcome.failures

    def load_range_of_one(self, day: str) -> None:
        """A backfill of one day, as Dagster launches it: a range whose first and last day are the same."""
        job = self.defs.resolve_job_def(backfill_sales_job.name)
        result = job.execute_in_process(instance=self.instance, raise_on_error=False,
                                        tags={LANE_TAG: BACKFILL, **range_tags(day, day)})
        assert result.success
        assert certify_run(self.platform, result.run_id, True, actor="atlasmart")

    def day(self, day: str) -> dict[str, dict]:
        """Per daily table: the day's published files (path under the table's data folder -> SHA-256 of the
        bytes), the fingerprint of its newest build and its certified version (number and fingerprint)."""
        warehouse = self.platform.warehouse
        states = self.platform.ledger.partitions.states([day])
        out = {}
        for spec in DAILY_SPECS:
            root = Path(warehouse.data_dir(spec))
            files = {str(Path(f).relative_to(root)): hashlib.sha256(Path(f).read_bytes()).hexdigest()
                     for f in warehouse.data_files(spec, [day])}
            history = states.get(spec.name, day)
            served = history.served
            out[spec.name] = {
                "files": files,
                "fingerprint": history.builds[-1].fingerprint if history.builds else None,
                "certified": (served.version, served.certification.fingerprint) if served else None,
            }
        return out


def differences(a: dict[str, dict], b: dict[str, dict]) -> dict[str, list[str]]:
    """Per table, what differs between two readings of one day (files, fingerprint, certified version)."""
    return {name: [what for what in a[name] if a[name][what] != b[name][what]]
            for name in a if a[name] != b[name]}


def compare(tmp_path: Path, days: int, rows: int, alone: list[int]) -> None:
    landing = tmp_path / "gen"
    keys = sorted(generate(landing, days, rows)["days"])
    in_range = Home(tmp_path / "range", landing / "landing")
    in_range.load(keys)
    by_itself = Home(tmp_path / "alone", landing / "landing")
    for n in alone:
        by_itself.load([keys[n]])
    for n in alone:
        ranged, single = in_range.day(keys[n]), by_itself.day(keys[n])
        assert all(t["files"] for t in ranged.values() if t["fingerprint"] is not None)
        assert differences(ranged, single) == {}, keys[n]
    middle = keys[alone[len(alone) // 2]]
    one = Home(tmp_path / "one", landing / "landing")
    one.load_range_of_one(middle)
    assert differences(in_range.day(middle), one.day(middle)) == {}


def test_a_day_alone_is_the_day_in_a_30_day_range(tmp_path):
    compare(tmp_path, 30, ROWS_PER_DAY, [0, 14, 29])


def test_a_day_alone_is_the_day_in_a_range_of_one(tmp_path):
    compare(tmp_path, 1, ROWS_PER_DAY, [0])
