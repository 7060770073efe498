"""Sequence continuity: a batch whose source_seq range goes back into another day's committed range is refused.

The sample commits source_seq 196..208 over 2026-09-17..21 (``atlasmart demo``
prints "committed source seq: 208"). A later batch that reuses those numbers
is a source problem, not a new day: readiness refuses it, the day is blocked
upstream, nothing is published and the raw store keeps only what it had.
"""

import pytest

from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.batch_lifecycle import REINSTATED, RETIRED, BatchDecisionError, decide
from atlasmart_dagster.store.ledger.partition_states import BLOCKED_UPSTREAM
from atlasmart_dagster.store.tables import ALL_TABLES
from atlasmart_dagster_tests.environment import SAMPLE_DAYS
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch
from atlasmart_dagster_tests.team_database import deployment  # noqa: F401 - the ledger query on SQLite and Postgres

NEW_DAY = "2026-09-22"


def run(env, days):
    return run_chain(env.defs, env.instance, env.platform, days, lane="backfill")


def deliver_new_day(env, seqs, **manifest):
    """A batch for 2026-09-22 built from 2026-09-21's lines, carrying ``seqs``."""
    template = read_rows(env.day_dir("2026-09-21"))
    rows = [
        {**template[i % len(template)], "source_seq": seq, "order_id": f"O2200{i}", "line_no": 1,
         "sales_date": NEW_DAY, "event_ts": f"{NEW_DAY}T09:00:00Z"}
        for i, seq in enumerate(seqs)
    ]
    return write_batch(env.day_dir(NEW_DAY), rows, batch_id="ERP-20260922-01", ready_at="2026-09-23T08:04:00Z",
                       **manifest)


def assert_blocked_with(env, outcome, day, reason):
    assert not outcome.success and outcome.certified == []
    assert outcome.result.get_asset_materialization_events() == []
    assert reason in " | ".join(outcome.failures)
    (blocked,) = env.ledger.partitions.events(partition=day, states=(BLOCKED_UPSTREAM,))
    assert blocked.asset == "raw_order_lines" and reason in blocked.detail["problems"]
    for spec in ALL_TABLES:
        if spec.partition_column:
            assert env.warehouse.partition_row_counts(spec, [day])[day] == 0, spec.name
    assert not list((env.home / "raw").glob(f"sales_date={day}/batch_id=*"))  # never admitted
    assert day not in {b["partition"] for b in env.ledger.batches.list()}


@pytest.mark.parametrize("seqs,manifest,reason", [
    (range(205, 210), {},
     "sequence regression: batch ERP-20260922-01 source_seq 205..209 overlaps batch ERP-20260920-01 of "
     "2026-09-20 (204..206), batch ERP-20260921-01 of 2026-09-21 (207..208)"),
    # The rows stay clear of 208, but the manifest claims 200..210: the committed range is the declared one.
    (range(209, 211), {"source_seq_low": 200, "source_seq_high": 210},
     "sequence regression: batch ERP-20260922-01 source_seq 200..210 overlaps batch ERP-20260918-01 of "
     "2026-09-18 (197..201), batch ERP-20260919-01 of 2026-09-19 (202..203), batch ERP-20260920-01 of "
     "2026-09-20 (204..206), batch ERP-20260921-01 of 2026-09-21 (207..208)"),
], ids=["rows-go-back", "manifest-claims-committed-numbers"])
def test_a_new_day_reusing_committed_sequence_numbers_is_blocked_upstream(env, seqs, manifest, reason):
    assert run(env, SAMPLE_DAYS).certified == SAMPLE_DAYS
    served = {d: env.ledger.partitions.served("mart_finance_daily_sales", d).certification for d in SAMPLE_DAYS}
    deliver_new_day(env, list(seqs), **manifest)

    assert_blocked_with(env, run(env, [NEW_DAY]), NEW_DAY, reason)
    assert {d: env.ledger.partitions.served("mart_finance_daily_sales", d).certification
            for d in SAMPLE_DAYS} == served  # the committed days are untouched


def test_two_new_days_of_one_range_run_may_not_share_sequence_numbers(env):
    rows = read_rows(env.day_dir("2026-09-21"))
    write_batch(env.day_dir("2026-09-21"), [{**r, "source_seq": s} for r, s in zip(rows, (205, 206))],
                batch_id="ERP-20260921-01")

    outcome = run(env, ["2026-09-20", "2026-09-21"])

    assert_blocked_with(env, outcome, "2026-09-21",
                        "sequence regression: batch ERP-20260921-01 source_seq 205..206 overlaps batch "
                        "ERP-20260920-01 of 2026-09-20 (204..206)")
    assert env.ledger.partitions.events(partition="2026-09-20", states=(BLOCKED_UPSTREAM,)) == []


@pytest.mark.on_s3  # reads what a team keeps in the bucket
def test_a_redelivery_supersedes_its_own_day_and_retired_batches_do_not_count(env):
    assert run(env, ["2026-09-21"]).certified == ["2026-09-21"]
    # A re-delivery of 2026-09-21 re-sends 207 and corrects 208's line as 209: within its own day an
    # overlap is a re-delivery superseding the day's first batch, not a regression.
    rows = read_rows(env.day_dir("2026-09-21"))
    write_batch(env.day_dir("2026-09-21"), [rows[0], {**rows[1], "source_seq": 209, "product_id": "P100"}],
                batch_id="ERP-20260921-02", ready_at="2026-09-22T10:00:00Z")
    assert run(env, ["2026-09-21"]).success
    assert [b["batch_id"] for b in env.ledger.batches.list("2026-09-21")] == ["ERP-20260921-01", "ERP-20260921-02"]

    deliver_new_day(env, [209, 210])
    assert_blocked_with(env, run(env, [NEW_DAY]), NEW_DAY,
                        "sequence regression: batch ERP-20260922-01 source_seq 209..210 overlaps batch "
                        "ERP-20260921-02 of 2026-09-21 (207..209)")

    decide(env.platform, "ERP-20260921-02", RETIRED, "erp-operations", "209 belongs to 2026-09-22",
           env.platform.clock.now())
    assert run(env, [NEW_DAY]).certified == [NEW_DAY]

    with pytest.raises(BatchDecisionError) as refused:
        decide(env.platform, "ERP-20260921-02", REINSTATED, "oncall", "retired by mistake", env.platform.clock.now())
    assert str(refused.value).startswith(
        "sequence regression: batch ERP-20260921-02 source_seq 207..209 overlaps batch ERP-20260922-01 of "
        "2026-09-22 (209..210): retire the overlapping batch first"
    )


@pytest.mark.parametrize("refund_seq,refused", [(209, False), (205, True)], ids=["later-number", "reused-number"])
def test_a_correction_may_span_other_days_ranges_but_never_reuse_their_numbers(env, refund_seq, refused):
    """A re-send of 09-18 (197..201) with a refund at a later number spans 09-19..21's ranges: accepted.
    The same refund carrying 205, a number 2026-09-20's rows committed, is a regression."""
    assert run(env, SAMPLE_DAYS).certified == SAMPLE_DAYS
    rows = read_rows(env.day_dir("2026-09-18"))
    write_batch(env.day_dir("2026-09-18"), rows + [{**rows[0], "source_seq": refund_seq, "status": "refunded"}],
                batch_id="ERP-20260918-02", ready_at="2026-09-23T06:30:00Z")
    outcome = run(env, ["2026-09-18"])
    if not refused:
        assert outcome.certified == ["2026-09-18"]
        return
    assert not outcome.success and outcome.certified == []
    assert ("sequence regression: batch ERP-20260918-02 source_seq 197..205 overlaps batch ERP-20260919-01 of "
            "2026-09-19 (202..203), batch ERP-20260920-01 of 2026-09-20 (204..206) and reuses their source_seq 205"
            ) in " | ".join(outcome.failures)
    assert env.ledger.partitions.served("mart_finance_daily_sales", "2026-09-18").version == 1
