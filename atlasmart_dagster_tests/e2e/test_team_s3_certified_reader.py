"""The consumer's reader on a team deployment: the ``certified`` ref through the Postgres SQL catalog, files in S3.

The same external reader as the embedded test
(``product/test_certified_branch_reader.py``), in its own virtual
environment with no AtlasMart on its path, given what a consumer is given:
the catalog's SQLAlchemy URL, the ``s3://`` warehouse, and the S3 endpoint,
region and credentials as pyiceberg FileIO properties. After a clean range,
an anomaly held, its approval and a withdrawal (published by the command
itself, no sensor tick), it finds day by day what ``atlasmart --json
status`` serves.
"""

from __future__ import annotations

import json

import pytest

from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.tables import MART_FINANCE_DAILY_SALES
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.product.test_anomaly_guard import NEXT_DAY, OWNER, day_rows, land
from atlasmart_dagster_tests.product.test_certified_branch import ONCALL, cli
from atlasmart_dagster_tests.product.test_certified_branch_reader import agree, reader_python  # noqa: F401
from atlasmart_dagster_tests.s3_server import s3_team_environment

pytestmark = pytest.mark.slow
WITHDRAWN = "2026-09-20"
FINANCE = MART_FINANCE_DAILY_SALES.name
# The history the anomaly guard judges the next day against: two days are enough, and each costs time on S3.
LOADED = SAMPLE_DAYS[3:]


def test_an_external_reader_of_the_certified_ref_on_s3_sees_what_status_serves(
        tmp_path, monkeypatch, capsys, reader_python):  # noqa: F811
    with s3_team_environment(monkeypatch) as prefix:
        env = Env(tmp_path)
        try:
            assert env.platform.home.warehouse_uri.startswith(prefix)
            assert run_chain(env.defs, env.instance, env.platform, LOADED, lane="backfill").certified == LOADED
            agree(env, capsys, reader_python)  # a clean range

            land(env, NEXT_DAY, day_rows(NEXT_DAY, 3, 209, scale=100))
            assert run_chain(env.defs, env.instance, env.platform, [NEXT_DAY], lane="current").certified == []
            days, found = agree(env, capsys, reader_python)
            assert days[NEXT_DAY]["state"] == "ANOMALY_HELD" and NEXT_DAY not in found[FINANCE]["days"]

            code, out = cli(env, capsys, "anomaly", "approve", "--day", NEXT_DAY, "--owner", OWNER, "--by",
                            "dana@atlasmart.example", "--reason", "store opening: real sales")
            assert code == 0, out
            days, found = agree(env, capsys, reader_python)
            assert days[NEXT_DAY]["state"] == "CERTIFIED" and NEXT_DAY in found[FINANCE]["days"]

            code, out = cli(env, capsys, "incident", "report", "--text", "20 September looks wrong", "--asset",
                            FINANCE, "--partition", WITHDRAWN, "--json")
            assert code == 0, out
            incident = json.loads(out)["incident"]
            code, out = cli(env, capsys, "incident", "contain", incident, "--withdraw-served", "--from", WITHDRAWN,
                            "--to", WITHDRAWN, "--actor", ONCALL)
            assert code == 0, out
            days, found = agree(env, capsys, reader_python)
            assert days[WITHDRAWN]["state"] == "WITHDRAWN"  # nothing older: the day leaves the ref
            assert WITHDRAWN not in found[FINANCE]["days"]
        finally:
            env.platform.ledger.close()
