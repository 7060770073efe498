"""Another engine, not the product's code, reads the ``certified`` ref and finds what ``atlasmart status`` serves.

The reader (``atlasmart_dagster_tests/external_reader.py``) runs in its own
virtual environment, made from PyPI packages (pyiceberg with pyarrow and the
SQLite catalog, and DuckDB) and cached under
``~/.cache/atlasmart/reader-venv-<key of the package specs>``; it cannot
import ``atlasmart_dagster``. After each decision it prints, per table and
day, the rows and the money sum of the ref, which must be the served
version's figures in ``atlasmart --json status`` (a day not served: absent).

Without network to PyPI the test is skipped, saying so, unless ``CI`` is set:
then it fails (CI must run it).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from atlasmart_dagster.defs.automation.certification_sensor import certification_tick
from atlasmart_dagster.ops.runs import run_chain
from atlasmart_dagster.product.certified_branch import BRANCH
from atlasmart_dagster.store.tables import (
    FACT_SALES,
    MART_EXECUTIVE_REVENUE,
    MART_FINANCE_DAILY_SALES,
    METRIC_GROSS_REVENUE,
)
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

from .test_anomaly_guard import NEXT_DAY, OWNER, day_rows, land
from .test_certified_branch import ONCALL, RESTATED, cli, env, status  # noqa: F401 - env is the fixture

READER_PACKAGES = ("pyiceberg[sql-sqlite,pyarrow]==0.12.*", "duckdb>=1.1,<3")
READER = Path(__file__).resolve().parents[1] / "external_reader.py"
# The money column each table's figures are summed from, and whose served controls they must equal.
MONEY = {
    METRIC_GROSS_REVENUE.name: ("value_usd", METRIC_GROSS_REVENUE.name),
    MART_FINANCE_DAILY_SALES.name: ("revenue_usd", MART_FINANCE_DAILY_SALES.name),
    MART_EXECUTIVE_REVENUE.name: ("revenue_usd", MART_EXECUTIVE_REVENUE.name),
    FACT_SALES.name: ("revenue_usd", MART_FINANCE_DAILY_SALES.name),  # read through the finance mart
}


def _python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


@pytest.fixture(scope="session")
def reader_python() -> Path:
    """The reader's own interpreter: a virtual environment from PyPI, built once per package set."""
    key = hashlib.sha256(json.dumps([sys.version_info[:2], *READER_PACKAGES]).encode()).hexdigest()[:12]
    venv = Path.home() / ".cache" / "atlasmart" / f"reader-venv-{key}"
    python = _python(venv)
    if not (venv / ".complete").is_file():
        try:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, capture_output=True,
                           timeout=300)
            subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                            *READER_PACKAGES], check=True, capture_output=True, text=True, timeout=900)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            detail = getattr(exc, "stderr", None) or str(exc)
            message = f"could not build the reader's environment from PyPI ({', '.join(READER_PACKAGES)}): {detail}"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        (venv / ".complete").write_text("\n".join(READER_PACKAGES) + "\n")
    check = subprocess.run([str(python), "-c", "import atlasmart_dagster"], capture_output=True, cwd="/",
                           env={"PATH": os.environ.get("PATH", "")})
    assert check.returncode != 0, "the reader's environment must not see the product"
    return python


def read_ref(python: Path, env) -> dict:
    """What the external reader finds on the ``certified`` ref of every table (run with no AtlasMart on its path)."""
    home = env.platform.home
    args = [str(python), str(READER), home.catalog_uri, home.warehouse_uri,
            *(f"{name}={column}" for name, (column, _) in MONEY.items())]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd="/",
                          env={"PATH": os.environ.get("PATH", ""), "HOME": str(Path.home())})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def differences(found: dict, days: dict[str, dict]) -> list[str]:
    """Where the reader's figures are not the served ones of ``atlasmart status`` (empty: they agree)."""
    problems = []
    for name, (column, product) in MONEY.items():
        served = {day: a for day, s in days.items() for a in s["assets"]
                  if a["asset"] == product and a["served_version"]}
        seen = found[name]["days"]
        if sorted(seen) != sorted(served):
            problems.append(f"{name}: the ref holds days {sorted(seen)}, status serves {sorted(served)}")
            continue
        for day, asset in served.items():
            if seen[day]["sum"] != asset["controls"]["revenue_usd"]:
                problems.append(f"{name} {day}: the ref sums {column} to {seen[day]['sum']}, status serves "
                                f"{asset['controls']['revenue_usd']} (version {asset['served_version']})")
        for day, entry in found[name]["index"].items():
            if product == name and day in served and entry["version"] != served[day]["served_version"]:
                problems.append(f"{name} {day}: the index says version {entry['version']}")
    return problems


def test_an_external_reader_of_the_certified_ref_sees_what_status_serves(env, capsys, reader_python):  # noqa: F811
    def agree() -> dict:
        days = status(env, capsys)
        found = read_ref(reader_python, env)
        assert differences(found, days) == []
        return days

    agree()  # a clean range
    land(env, NEXT_DAY, day_rows(NEXT_DAY, 3, 209, scale=100))
    assert run_chain(env.defs, env.instance, env.platform, [NEXT_DAY], lane="current").certified == []
    assert agree()[NEXT_DAY]["state"] == "ANOMALY_HELD"  # absent
    assert cli(env, capsys, "anomaly", "approve", "--day", NEXT_DAY, "--owner", OWNER, "--by", "dana@atlasmart.example",
               "--reason", "store opening: real sales")[0] == 0
    assert agree()[NEXT_DAY]["state"] == "CERTIFIED"  # present
    rows = [{**r, "source_seq": r["source_seq"] + 500, "line_amount_usd": "200.00", "line_cost_usd": "120.00"}
            for r in read_rows(env.day_dir(RESTATED))]
    write_batch(env.day_dir(RESTATED), rows, batch_id="ERP-20260919-02", ready_at="2026-09-23T06:30:00Z")
    assert run_chain(env.defs, env.instance, env.platform, [RESTATED], lane="backfill").certified == []
    assert agree()[RESTATED]["state"] == "RESTATEMENT_HELD"  # v1 kept
    assert cli(env, capsys, "restatement", "approve", "--partition", RESTATED, "--owner", OWNER, "--by",
               "erp data owner", "--reason", "the ERP corrected the prices")[0] == 0
    assert agree()[RESTATED]["certified_version"] == 2
    code, out = cli(env, capsys, "incident", "report", "--text", "19 September looks doubled", "--asset",
                    MART_FINANCE_DAILY_SALES.name, "--partition", RESTATED, "--json")
    incident = json.loads(out)["incident"]
    assert cli(env, capsys, "incident", "contain", incident, "--withdraw-served", "--from", RESTATED, "--to", RESTATED,
               "--actor", ONCALL)[0] == 0
    certification_tick(env.instance, env.platform, None, actor="certification_sensor")
    assert agree()[RESTATED]["state"] == "WITHDRAWN"  # back to v1

    # Doctored: the held build of a day published to the branch before any certification. The comparison sees it.
    held_day = "2026-09-23"
    land(env, held_day, day_rows(held_day, 3, 900, scale=10000))
    assert run_chain(env.defs, env.instance, env.platform, [held_day], lane="current").certified == []
    spec = MART_FINANCE_DAILY_SALES
    main_head = env.warehouse.current_snapshot_id(spec)
    env.warehouse.publish_branch(spec, BRANCH, {held_day: main_head}, table_properties={}, snapshot_properties={})
    found = read_ref(reader_python, env)
    problems = differences(found, status(env, capsys))
    assert any(held_day in p and spec.name in p for p in problems), problems
