"""Another engine, not the product's code, reads the ``certified`` ref and finds what ``atlasmart status`` serves.

The reader (``atlasmart_dagster_tests/external_reader.py``) runs in its own
virtual environment, made from PyPI packages (pyiceberg with pyarrow and the
SQLite and Postgres SQL catalogs, and DuckDB) and cached under
``~/.cache/atlasmart/reader-venv-<key of the package specs>``; it cannot
import ``atlasmart_dagster``. After each decision it prints, per table and
day, the rows and the money sum of the ref, which must be the served
version's figures in ``atlasmart --json status`` (a day not served: absent).
The second test does the same after the operations that rewrite ``main`` or
the table metadata without a serving decision (a rollback, a failed rebuild
of a served day, ``maintain``, ``backup`` and ``restore``), and reads every
``certified-<day>-v<version>`` tag against the versions status names.

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
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.certified_branch import BRANCH, tag_name
from atlasmart_dagster.store.tables import (
    FACT_SALES,
    MART_EXECUTIVE_REVENUE,
    MART_FINANCE_DAILY_SALES,
    METRIC_GROSS_REVENUE,
)
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

from .test_anomaly_guard import NEXT_DAY, OWNER, day_rows, land
from .test_certified_branch import FAILED, ONCALL, RESTATED, cli, env, status  # noqa: F401 - env is the fixture

# sql-postgres: the team deployment's catalog is a SQL catalog on Postgres (e2e/test_team_s3_certified_reader.py).
READER_PACKAGES = ("pyiceberg[sql-sqlite,sql-postgres,pyarrow]==0.12.*", "duckdb>=1.1,<3")
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


def read_ref(python: Path, env, tags: bool = False) -> dict:
    """What the external reader finds on the ``certified`` ref of every table (run with no AtlasMart on its path).

    ``tags``: also every ``certified-<day>-v<version>`` tag. On an object store the reader is given the
    endpoint, region and the test's credentials as pyiceberg FileIO properties, as a consumer would be.
    """
    home = env.platform.home
    args = [str(python), str(READER), home.catalog_uri, home.warehouse_uri,
            *(f"{name}={column}" for name, (column, _) in MONEY.items())]
    if tags:
        args.append("--tags")
    if home.object_root is not None:
        location = home.object_root
        args += ["--s3-region", location.region, "--s3-access-key-id", os.environ["AWS_ACCESS_KEY_ID"],
                 "--s3-secret-access-key", os.environ["AWS_SECRET_ACCESS_KEY"]]
        if location.endpoint:
            args += ["--s3-endpoint", location.endpoint]
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


def tag_differences(found: dict, days: dict[str, dict]) -> list[str]:
    """Every certified version status knows of a day (served and previous) against its tag as the reader reads it.

    Every certified product of a day carries the same controls, so a previous version's are the status's.
    """
    problems = []
    for name, (column, product) in MONEY.items():
        if product != name:
            continue  # a table read through a product carries the branch, not the tags
        tags = found[name]["tags"]
        for day, s in days.items():
            served = next(a for a in s["assets"] if a["asset"] == name)
            versions = [(v["version"], v["controls"]) for v in s["previous_versions"]]
            if served["served_version"]:
                versions.append((served["served_version"], served["controls"]))
            for version, controls in versions:
                tag = tag_name(day, version)
                if tag not in tags:
                    problems.append(f"{name}: the reader finds no tag {tag}")
                elif tags[tag].get("sum") != controls["revenue_usd"]:
                    problems.append(f"{name} {tag}: the tag sums {column} to {tags[tag].get('sum')}, status "
                                    f"certified {controls['revenue_usd']}")
    return problems


def agree(env, capsys, python: Path, tags: bool = False) -> tuple[dict, dict]:  # noqa: F811
    """``atlasmart status`` and the external reader, day by day (and version tag by tag): they must agree."""
    days = status(env, capsys)
    found = read_ref(python, env, tags)
    assert differences(found, days) == []
    if tags:
        assert tag_differences(found, days) == []
    return days, found


def heads(found: dict) -> dict[str, int | None]:
    return {name: table["snapshot_id"] for name, table in found.items()}


def test_an_external_reader_of_the_certified_ref_sees_what_status_serves(env, capsys, reader_python):  # noqa: F811
    agree(env, capsys, reader_python)  # a clean range
    land(env, NEXT_DAY, day_rows(NEXT_DAY, 3, 209, scale=100))
    assert run_chain(env.defs, env.instance, env.platform, [NEXT_DAY], lane="current").certified == []
    assert agree(env, capsys, reader_python)[0][NEXT_DAY]["state"] == "ANOMALY_HELD"  # absent
    assert cli(env, capsys, "anomaly", "approve", "--day", NEXT_DAY, "--owner", OWNER, "--by", "dana@atlasmart.example",
               "--reason", "store opening: real sales")[0] == 0
    assert agree(env, capsys, reader_python)[0][NEXT_DAY]["state"] == "CERTIFIED"  # present
    rows = [{**r, "source_seq": r["source_seq"] + 500, "line_amount_usd": "200.00", "line_cost_usd": "120.00"}
            for r in read_rows(env.day_dir(RESTATED))]
    write_batch(env.day_dir(RESTATED), rows, batch_id="ERP-20260919-02", ready_at="2026-09-23T06:30:00Z")
    assert run_chain(env.defs, env.instance, env.platform, [RESTATED], lane="backfill").certified == []
    assert agree(env, capsys, reader_python)[0][RESTATED]["state"] == "RESTATEMENT_HELD"  # v1 kept
    assert cli(env, capsys, "restatement", "approve", "--partition", RESTATED, "--owner", OWNER, "--by",
               "erp data owner", "--reason", "the ERP corrected the prices")[0] == 0
    assert agree(env, capsys, reader_python)[0][RESTATED]["certified_version"] == 2
    code, out = cli(env, capsys, "incident", "report", "--text", "19 September looks doubled", "--asset",
                    MART_FINANCE_DAILY_SALES.name, "--partition", RESTATED, "--json")
    incident = json.loads(out)["incident"]
    assert cli(env, capsys, "incident", "contain", incident, "--withdraw-served", "--from", RESTATED, "--to", RESTATED,
               "--actor", ONCALL)[0] == 0
    certification_tick(env.instance, env.platform, None, actor="certification_sensor")
    assert agree(env, capsys, reader_python)[0][RESTATED]["state"] == "WITHDRAWN"  # back to v1

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


def test_the_reader_still_sees_what_status_serves_after_rollback_failed_rebuild_maintain_and_restore(
        env, capsys, reader_python):  # noqa: F811
    """The operations that rewrite ``main`` or the table's metadata, but must not move what consumers are served."""
    finance = MART_FINANCE_DAILY_SALES.name
    agree(env, capsys, reader_python, tags=True)  # a clean range, every version tag readable

    # A restatement held leaves its build on main; rolling main back to the certified version does not move the ref.
    rows = [{**r, "source_seq": r["source_seq"] + 500, "line_amount_usd": "200.00", "line_cost_usd": "120.00"}
            for r in read_rows(env.day_dir(RESTATED))]
    write_batch(env.day_dir(RESTATED), rows, batch_id="ERP-20260919-02", ready_at="2026-09-23T06:30:00Z")
    assert run_chain(env.defs, env.instance, env.platform, [RESTATED], lane="backfill").certified == []
    days, held = agree(env, capsys, reader_python)
    assert days[RESTATED]["state"] == "RESTATEMENT_HELD"
    for asset in (FACT_SALES.name, finance):
        code, out = cli(env, capsys, "--json", "rollback", "--asset", asset, "--partition", RESTATED, "--actor",
                        ONCALL, "--reason", "main back to the certified build")
        assert code == 0, out
    days, found = agree(env, capsys, reader_python)
    assert heads(found) == heads(held) and days[RESTATED]["certified_version"] == 1

    # A failed rebuild of a served day (a re-send the contract gate stops): the ref and what it serves stay.
    renamed = [{("gross_line_amount_usd" if k == "line_amount_usd" else k): v for k, v in r.items()}
               for r in read_rows(env.day_dir(FAILED))]
    write_batch(env.day_dir(FAILED), [{**r, "source_seq": r["source_seq"] + 600} for r in renamed],
                batch_id="ERP-20260920-02", ready_at="2026-09-23T06:30:00Z")
    assert not run_chain(env.defs, env.instance, env.platform, [FAILED], lane="backfill").success
    days, found = agree(env, capsys, reader_python, tags=True)
    assert heads(found) == heads(held) and found[finance]["days"] == held[finance]["days"]
    assert days[FAILED]["state"] == "CERTIFIED" and days[FAILED]["certified_version"] == 1

    # maintain expires every snapshot nothing relies on: the ref and every certified version's tag survive.
    code, out = cli(env, capsys, "--json", "maintain", "--keep-last", "1", "--remove-orphans")
    assert code == 0, out
    assert sum(t["expired"] for t in json.loads(out)["expired"].values()) > 0
    days, found = agree(env, capsys, reader_python, tags=True)
    assert heads(found) == heads(held)

    # The held restatement is still the owner's to approve after maintain: its builds were kept (not the current
    # snapshots any more after the rollback), and approving it moves the ref to v2.
    code, out = cli(env, capsys, "restatement", "approve", "--partition", RESTATED, "--owner", OWNER, "--by",
                    "erp data owner", "--reason", "the ERP corrected the prices")
    assert code == 0, out
    days, held = agree(env, capsys, reader_python, tags=True)
    assert days[RESTATED]["certified_version"] == 2

    # backup, then a decision that moves the ref (a new day certified), then restore into the same home: the ref,
    # its index and the tags are back as they were at the backup, and status says so too.
    code, out = cli(env, capsys, "--json", "backup")
    assert code == 0, out
    backup = json.loads(out)["path"]
    land(env, NEXT_DAY, day_rows(NEXT_DAY, 3, 209))
    assert run_chain(env.defs, env.instance, env.platform, [NEXT_DAY], lane="current").certified == [NEXT_DAY]
    days, moved = agree(env, capsys, reader_python, tags=True)
    assert days[NEXT_DAY]["state"] == "CERTIFIED" and heads(moved) != heads(held)
    code, out = cli(env, capsys, "--json", "restore", backup)
    assert code == 0, out
    days, found = agree(env, capsys, reader_python, tags=True)
    assert days[NEXT_DAY]["certified_version"] is None and days[RESTATED]["certified_version"] == 2
    assert heads(found) == heads(held)
    assert {n: sorted(t["tags"]) for n, t in found.items()} == {
        n: sorted(set(t["tags"]) - {tag_name(NEXT_DAY, 1)}) for n, t in moved.items()}
