"""A day built alone is the same day built inside a range: the same data files (names and bytes), the same
fingerprint and the same certified version, in every layer (issue 34, "what must not change").

Home ``range`` loads a generated landing zone in one single-run backfill over every day; home ``alone``
loads the first, a middle and the last day each in a run of its own; home ``one`` loads the middle day
as a range of one day. Days are independent (every window partitions by day), so a day alone in an empty
home has exactly the inputs it has inside the range. The warehouse test covers days of several row groups,
which the chain tests' small days never reach.
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
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.lanes import BACKFILL, LANE_TAG
from atlasmart_dagster.product.run_certification import certify_run
from atlasmart_dagster.store.home import AtlasmartHome
from atlasmart_dagster.store.tables import DAILY_CHAIN, FACT_SALES, REGISTRY
from atlasmart_dagster.store.warehouse import Warehouse, duckdb_connection

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


def compare(tmp_path: Path, days: int, rows: int, alone: list[int], start: str = "2026-09-17") -> None:
    landing = tmp_path / "gen"
    keys = sorted(generate(landing, days, rows, start=start)["days"])
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


@pytest.mark.slow
def test_a_day_alone_is_the_day_in_a_365_day_range(tmp_path):
    """A year at 50 rows a day. The partitions' first day is read at import (``defs/partitions.py``), and the
    year ends before today only from an earlier first day: the comparison runs in a process of its own."""
    code = ("import sys; from pathlib import Path; from atlasmart_dagster_tests.store.test_day_alone_vs_in_range "
            "import compare; compare(Path(sys.argv[1]), 365, 50, [0, 182, 364], start='2025-09-17')")
    env = {**os.environ, "ATLASMART_FIRST_SALES_DATE": "2025-09-17"}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


def _fact_rows(days: list[str], rows: int) -> str:
    """Fact rows for ``days``, ``rows`` a day, arriving in no particular order (the writer sorts them)."""
    listed = ", ".join(f"DATE '{d}'" for d in days)
    return f"""
        SELECT d AS sales_date, 'O' || lpad(CAST((k * 7919) % {rows} AS VARCHAR), 9, '0') AS order_id,
               1 AS line_no, TIMESTAMPTZ '2026-09-17 00:00:00+00' + INTERVAL 1 SECOND * k AS event_ts,
               CASE WHEN k % 11 = 0 THEN NULL ELSE 'C' || (k % 97) END AS customer_id, 'P1' AS product_id,
               'web' AS channel, 1 AS quantity, 10.00 AS revenue_usd, 6.00 AS cost_usd, 4.00 AS gross_profit_usd,
               'B1' AS batch_id, k AS source_seq
        FROM unnest([{listed}]) t(d), range({rows}) r(k)"""


def test_a_day_of_several_row_groups_is_written_the_same_alone_and_in_a_range(tmp_path):
    days = ["2026-09-17", "2026-09-18", "2026-09-19"]
    rows = 300_000  # three row groups of the writer's 122,880
    files = {}
    for name, batches in (("range", [days]), ("alone", [[d] for d in days])):
        warehouse = Warehouse(AtlasmartHome(tmp_path / name))
        con = duckdb_connection()
        try:
            for batch in batches:
                warehouse.overwrite_sql(FACT_SALES, con, _fact_rows(batch, rows), batch)
        finally:
            con.close()
        root = warehouse.data_dir(FACT_SALES)
        files[name] = {str(Path(f).relative_to(root)): Path(f).read_bytes() for f in warehouse.data_files(FACT_SALES)}
    assert len(files["range"]) == len(days)
    assert files["range"] == files["alone"]
