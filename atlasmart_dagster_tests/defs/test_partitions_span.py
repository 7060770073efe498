"""Which days are partitions: from the bundled sample's first day, to yesterday or to the last day a setting names.

The UI's *Partitions* tab lists every partition newest first, and a day
nothing materialized is *Missing*: on the bundled sample, on the system clock,
that was every day from the sample's last to yesterday, above the sample. The
demo and UI paths of ``scripts/dev`` end the partitions on the sample's last
day instead (``ATLASMART_LAST_SALES_DATE``). The setting is read when the
code location loads, so the cases that set it run in a child process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from atlasmart_dagster.defs.first_sales_date import DEFAULT_FIRST_SALES_DATE
from atlasmart_dagster.defs.last_sales_date import LAST_SALES_DATE_ENV, SAMPLE_LAST_SALES_DATE, last_sales_date_problem
from atlasmart_dagster.defs.partitions import LAST_SALES_DATE, daily_partitions

REPO = Path(__file__).resolve().parents[2]
SAMPLE_LANDING = REPO / "atlasmart_dagster" / "sample_data" / "landing"
SCRIPT = REPO / "scripts" / "dev"


def sample_days() -> list[str]:
    folders = [p.name for p in SAMPLE_LANDING.iterdir() if p.name.startswith("sales_date=")]
    return sorted(name.removeprefix("sales_date=") for name in folders)


def test_the_partitions_start_on_the_samples_first_day_and_the_samples_last_day_is_named_right():
    days = sample_days()
    assert DEFAULT_FIRST_SALES_DATE == days[0]  # no Missing day before the sample
    assert SAMPLE_LAST_SALES_DATE == days[-1]
    (named,) = re.findall(r"^SAMPLE_LAST_DAY=(\S+)$", SCRIPT.read_text(), re.MULTILINE)
    assert named == SAMPLE_LAST_SALES_DATE


def test_unset_the_partitions_end_yesterday_the_newest_day_that_ended_not_today():
    assert LAST_SALES_DATE is None and not os.environ.get(LAST_SALES_DATE_ENV)
    today = datetime.now(UTC).date()
    assert daily_partitions.get_last_partition_key() == (today - timedelta(days=1)).isoformat()
    assert not daily_partitions.has_partition_key(today.isoformat())


@pytest.mark.parametrize("value,says", [
    (None, None), ("", None), ("2026-09-21", None), ("2026-09-17", None),
    ("2026-09-16", "is 2026-09-16, before the first partition 2026-09-17"),
    ("21/09/2026", "is '21/09/2026', not a date"),
])
def test_the_last_day_must_be_a_day_from_the_first_partition_on(value, says):
    problem = last_sales_date_problem(value, "2026-09-17")
    assert problem is None if says is None else f"${LAST_SALES_DATE_ENV} {says}" in problem


def _partitions_in_child(env: dict[str, str]) -> list[str]:
    code = "import json; from atlasmart_dagster.defs.partitions import daily_partitions as d; " \
           "print(json.dumps(d.get_partition_keys()))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_last_day_ends_the_partitions_there():
    env = {**os.environ, LAST_SALES_DATE_ENV: SAMPLE_LAST_SALES_DATE}
    assert _partitions_in_child(env) == sample_days()


def _ends_on_sample(*argv: str, **env: str) -> str:
    """What scripts/dev's end_partitions_on_the_sample leaves in ATLASMART_LAST_SALES_DATE ("unset" if nothing)."""
    function = re.search(r"^end_partitions_on_the_sample\(\) \{.*?^\}$", SCRIPT.read_text(), re.MULTILINE | re.DOTALL)
    script = (f"set -euo pipefail\nSAMPLE_LAST_DAY={SAMPLE_LAST_SALES_DATE}\n{function.group(0)}\n"
              'end_partitions_on_the_sample "$@"\necho "${ATLASMART_LAST_SALES_DATE-unset}"')
    base = {k: v for k, v in os.environ.items() if k not in ("ATLASMART_LANDING", LAST_SALES_DATE_ENV)}
    done = subprocess.run(["bash", "-c", script, "dev", *argv], env={**base, **env}, capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


def test_scripts_dev_ends_the_partitions_on_the_sample_only_when_it_runs_on_the_sample():
    assert _ends_on_sample() == SAMPLE_LAST_SALES_DATE
    assert _ends_on_sample("--json") == SAMPLE_LAST_SALES_DATE
    assert _ends_on_sample("--landing", "/srv/landing") == "unset"
    assert _ends_on_sample("--landing=/srv/landing") == "unset"
    assert _ends_on_sample(ATLASMART_LANDING="/srv/landing") == "unset"
    assert _ends_on_sample(ATLASMART_LAST_SALES_DATE="") == ""  # set empty: follow the clock
    assert _ends_on_sample(ATLASMART_LAST_SALES_DATE="2026-09-19") == "2026-09-19"


MISSING = """
import json, sys
import dagster as dg
from atlasmart_dagster.defs.partitions import daily_partitions
instance = dg.DagsterInstance.from_config(sys.argv[1])
keys = daily_partitions.get_partition_keys()
print(json.dumps({a: [k for k in keys if k not in instance.get_materialized_partitions(dg.AssetKey(a))]
                  for a in sys.argv[2:]}))
"""


@pytest.mark.slow
def test_the_demo_on_the_sample_leaves_no_missing_day_in_the_partitions_the_ui_lists(tmp_path):
    """The README path: ``scripts/dev demo`` then ``scripts/dev ui``, both with the setting scripts/dev gives them."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "ATLASMART_LANDING", LAST_SALES_DATE_ENV)}
    on_sample = {**env, LAST_SALES_DATE_ENV: _ends_on_sample()}
    cli = [sys.executable, "-m", "atlasmart_dagster.cli.main", "--home", str(home)]
    subprocess.run([*cli, "demo"], env=on_sample, capture_output=True, check=True)
    folder = subprocess.run([*cli, "dagster-home"], env=on_sample, capture_output=True, text=True, check=True)
    assets = ["served_mart_finance_daily_sales", "served_metric_gross_revenue", "mart_finance_daily_sales"]

    def missing(process_env):
        out = subprocess.run([sys.executable, "-c", MISSING, folder.stdout.strip(), *assets], env=process_env,
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    assert missing(on_sample) == {a: [] for a in assets}
    # the contrast, the finding: the same home read with partitions that follow the clock
    yesterday = date.fromisoformat(daily_partitions.get_last_partition_key())
    after = [(date(2026, 9, 22) + timedelta(days=n)).isoformat() for n in range((yesterday - date(2026, 9, 21)).days)]
    assert missing(env) == {a: after for a in assets}


SENSOR = """
import json, sys
from pathlib import Path
from atlasmart_dagster.defs.automation.sensors import plan_manifest_runs
from atlasmart_dagster_tests.environment import Env
env = Env(Path(sys.argv[1]), clock="logical")
env.platform.clock.set("2026-09-22T08:10:00Z")
requests, skipped = plan_manifest_runs(env.platform)
print(json.dumps({"requested": [r.partition_key for r in requests], "skipped": skipped}))
"""


def test_the_landing_sensor_asks_for_no_day_after_the_last_partition_and_says_why(tmp_path):
    env = {**os.environ, LAST_SALES_DATE_ENV: "2026-09-20"}
    out = subprocess.run([sys.executable, "-c", SENSOR, str(tmp_path)], env=env, capture_output=True, text=True,
                         check=True).stdout
    planned = json.loads(out.strip().splitlines()[-1])
    assert planned["requested"] == sample_days()[:-1]  # a request for 2026-09-21 would name no partition
    assert planned["skipped"] == ["2026-09-21: after the last partition 2026-09-20 ($ATLASMART_LAST_SALES_DATE)"]
