"""Step retries are counted even while the storage they retry is down, the ledger database included.

A retry is spooled to a file of the home before it is written to the ledger
(``Platform.record_step_retry``). The outage here is real: the team's scratch
database refuses every connection (``ALLOW_CONNECTIONS false``, its sessions
terminated), as a Postgres that is restarting or down does, while the retry
is taken; the process that took it is then gone, and another one opens the
home once the database is back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from atlasmart_dagster.ops.observability.prometheus import registry_for
from atlasmart_dagster.ops.runs.chains import run_chain, run_reference
from atlasmart_dagster.store.platform import Platform
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.team_database import _admin

AT = datetime(2026, 9, 22, 8, 5, tzinfo=UTC)


def retries_counted(platform: Platform) -> dict[str, float]:
    """The exporter's ``atlasmart_step_retries_total`` per asset."""
    (family,) = [f for f in registry_for(platform).collect() if f.name == "atlasmart_step_retries"]
    return {s.labels["asset"]: s.value for s in family.samples if s.name == "atlasmart_step_retries_total"}


@contextmanager
def database_down(url: str) -> Iterator[None]:
    """The database refuses every connection, its open sessions cut, until the block ends."""
    name = url.rsplit("/", 1)[1]
    con = _admin()
    try:
        with con.cursor() as cur:
            cur.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
            cur.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
        yield
    finally:
        with con.cursor() as cur:
            cur.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
        con.close()


def test_a_retry_taken_while_the_ledger_database_is_down_is_counted_and_written_when_it_is_back(
        tmp_path, team_deployment):
    env = Env(tmp_path)
    assert run_reference(env.defs, env.instance)  # a born home: its ledger and catalog are in the database
    run_id = str(uuid.uuid4())
    with database_down(team_deployment):
        # the step's retry: taken while the database refuses it, without failing on the record
        env.platform.record_step_retry(run_id, "fact_sales", 2, AT)
        env.platform.record_step_retry(run_id, "fact_sales", 3, AT)
    env.platform.ledger.close()
    assert env.platform.ledger.runs.retries([run_id]) == []  # the database never took them

    # Another process (the exporter, the next run) opens the home once the database is back.
    later = Platform.open(env.home, env.landing)
    assert retries_counted(later) == {"fact_sales": 2}

    # The next step writes them to the ledger; they are counted once, not once per place.
    outcome = run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS[:1], lane="backfill")
    assert outcome.success, outcome
    assert [(r["asset"], r["attempt"]) for r in later.ledger.runs.retries([run_id])] == [("fact_sales", 2),
                                                                                         ("fact_sales", 3)]
    assert later.retry_spool.pending() == []
    assert retries_counted(later) == {"fact_sales": 2}
    later.ledger.close()
    env.platform.ledger.close()


def test_a_spooled_retry_the_ledger_already_holds_is_not_written_twice(tmp_path):
    """A move cut short between the ledger's commit and the spool's truncation leaves the line in both."""
    env = Env(tmp_path)
    run_id = str(uuid.uuid4())
    env.platform.record_step_retry(run_id, "agg_daily_sales", 2, AT)
    assert len(env.ledger.runs.retries([run_id])) == 1 and env.platform.retry_spool.pending() == []
    env.platform.retry_spool.append(run_id, "agg_daily_sales", 2, AT)  # the line the cut-short move left
    assert retries_counted(env.platform) == {"agg_daily_sales": 1}
    env.platform.flush_step_retries()
    assert len(env.ledger.runs.retries([run_id])) == 1 and env.platform.retry_spool.pending() == []
    assert retries_counted(env.platform) == {"agg_daily_sales": 1}
