"""A day that is not ready publishes nothing, runs nothing downstream, and says why."""

import pytest

from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.ledger.partition_states import BLOCKED_UPSTREAM
from atlasmart_dagster.store.tables import ALL_TABLES
from atlasmart_dagster_tests.landing_batches import patch_manifest, write_batch

DAY = "2026-09-20"


def assert_nothing_published(env, outcome):
    assert not outcome.success
    materialized = outcome.result.get_asset_materialization_events()
    assert materialized == [], [e.asset_key for e in materialized]
    for spec in ALL_TABLES:
        if spec.partition_column:
            assert env.warehouse.partition_row_counts(spec, [DAY])[DAY] == 0, spec.name
    assert outcome.certified == []


@pytest.mark.parametrize(
    "break_it,says",
    [
        (lambda d: (d / "_manifest.json").unlink(), "manifest _manifest.json missing"),
        (lambda d: patch_manifest(d, data_sha256="f" * 64), "data_sha256 mismatch"),
        (lambda d: patch_manifest(d, expected_rows=30), "expected_rows is 30 but order_lines.jsonl has 3 rows"),
        (lambda d: write_batch(d, data=b'{"source_seq": 204,\n', expected_rows=1), "is malformed"),
    ],
    ids=["missing-manifest", "hash-lies", "row-count-lies", "malformed-file"],
)
def test_not_ready_source_fails_raw_with_a_clear_non_retryable_error(env, break_it, says):
    break_it(env.day_dir(DAY))
    outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
    assert_nothing_published(env, outcome)
    (failure,) = outcome.failures
    assert failure.startswith("raw_order_lines: source not ready for sales_date=2026-09-20")
    assert says in failure
    # Failure(allow_retries=False): one attempt only, no retry events
    types = [e.event_type_value for e in outcome.result.all_events]
    assert "STEP_UP_FOR_RETRY" not in types
    (blocked,) = env.ledger.partitions.events(partition=DAY, states=(BLOCKED_UPSTREAM,))
    assert blocked.asset == "raw_order_lines" and says in " ".join(blocked.detail["problems"])


def test_range_run_with_one_unready_day_publishes_no_day(env):
    (env.day_dir("2026-09-19") / "_manifest.json").unlink()
    outcome = run_chain(env.defs, env.instance, env.platform, ["2026-09-18", "2026-09-19", "2026-09-20"], lane="backfill")
    assert not outcome.success
    assert "source not ready for 1 of 3 partitions of 2026-09-18..2026-09-20" in outcome.failures[0]
    assert "sales_date=2026-09-19: manifest _manifest.json missing" in outcome.failures[0]
    assert outcome.result.get_asset_materialization_events() == []
