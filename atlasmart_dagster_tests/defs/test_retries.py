"""Transient failures are retried under the policy; permanent ones fail at once."""

import sqlite3

import duckdb
import pytest
from pyiceberg.exceptions import CommitFailedException

from atlasmart_dagster.drills.faults import INJECT_TRANSIENT_TAG, transient_faults_by_tag
from atlasmart_dagster.errors import ContractViolation, SourceNotReady, TransientError, is_transient
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.ledger.partition_states import BUILT


@pytest.mark.parametrize(
    "exc,transient",
    [
        (CommitFailedException("Table has been updated by another process"), True),
        (sqlite3.OperationalError("database is locked"), True),
        (sqlite3.OperationalError("no such table: x"), False),
        (duckdb.IOException("could not read file"), True),
        (ConnectionResetError(), True),
        (FileNotFoundError("gone"), False),
        (TransientError("x"), True),
        (SourceNotReady("2026-09-20", ["manifest missing"]), False),
        (ContractViolation("drift"), False),
        (ValueError("a bug"), False),
    ],
)
def test_classification(exc, transient):
    assert is_transient(exc) is transient


def test_injected_transient_failure_is_retried_and_published_once(env):
    with transient_faults_by_tag():
        outcome = run_chain(
            env.defs, env.instance, env.platform, ["2026-09-20"], lane="backfill", tags={INJECT_TRANSIENT_TAG: "fact_sales"}
        )
    assert outcome.success and outcome.certified == ["2026-09-20"]
    fact_events = [e.event_type_value for e in outcome.result.all_events if e.step_key == "fact_sales"]
    assert "STEP_UP_FOR_RETRY" in fact_events and "STEP_RESTARTED" in fact_events and fact_events[-1] == "STEP_SUCCESS"
    assert fact_events.index("STEP_UP_FOR_RETRY") < fact_events.index("STEP_RESTARTED") < fact_events.index("ASSET_MATERIALIZATION")
    built = env.ledger.partitions.events(asset="fact_sales", run_id=outcome.run_id, states=(BUILT,))
    assert len(built) == 1  # the failed attempt published nothing


def test_permanent_failure_is_not_retried_and_keeps_the_certified_version(env):
    day = "2026-09-20"
    first = run_chain(env.defs, env.instance, env.platform, [day], lane="backfill")
    served = env.ledger.partitions.served("mart_finance_daily_sales", day)
    # The raw evidence itself changed after admission (a replay reads only the raw store): permanent.
    (stored,) = (env.home / "raw").glob(f"sales_date={day}/batch_id=*/order_lines.jsonl")
    stored.write_bytes(stored.read_bytes().replace(b'"100.00"', b'"900.00"'))
    second = run_chain(env.defs, env.instance, env.platform, [day], lane="backfill")
    assert first.success and not second.success
    assert "no longer hashes to its manifest" in " | ".join(second.failures)
    assert [e.event_type_value for e in second.result.all_events].count("STEP_UP_FOR_RETRY") == 0
    assert env.ledger.partitions.served("mart_finance_daily_sales", day) == served


def test_without_the_drill_seam_the_tag_injects_nothing(env):
    """Production registers no step hook: a run tagged for a fault by mistake just runs."""
    outcome = run_chain(
        env.defs, env.instance, env.platform, ["2026-09-20"], lane="backfill", tags={INJECT_TRANSIENT_TAG: "fact_sales"}
    )
    events = [e.event_type_value for e in outcome.result.all_events if e.step_key == "fact_sales"]
    assert outcome.success and "STEP_UP_FOR_RETRY" not in events


@pytest.mark.parametrize("window,retries,shortest", [(0, 0, 0), (6, 3, 8), (60, 6, 114), (120, 7, 240), (300, 8, 494)])
def test_storage_retries_span_their_window(window, retries, shortest):
    from atlasmart_dagster.defs.retries import storage_retry_policy

    policy = storage_retry_policy(window)
    assert policy.max_retries == retries
    waits = [policy.calculate_delay(k) for k in range(1, retries + 1)]
    assert sum(waits) >= shortest >= window  # jitter never takes the waits below the window


def test_the_default_storage_retry_window_spans_a_typical_endpoint_restart(monkeypatch):
    from atlasmart_dagster.defs.retries import STORAGE_RETRY_WINDOW_ENV, storage_retry_policy, storage_retry_window
    from atlasmart_dagster.errors import UsageError

    monkeypatch.delenv(STORAGE_RETRY_WINDOW_ENV, raising=False)
    assert storage_retry_window() == 60
    policy = storage_retry_policy()
    assert sum(policy.calculate_delay(k) for k in range(1, policy.max_retries + 1)) >= 60
    for bad in ("soon", "-1", "4000"):
        monkeypatch.setenv(STORAGE_RETRY_WINDOW_ENV, bad)
        with pytest.raises(UsageError, match=STORAGE_RETRY_WINDOW_ENV):
            storage_retry_window()
