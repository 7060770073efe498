"""Every blocking check, seen failing: a fault in the data fails it, nothing below it builds, nothing certifies.

One case per blocking check (``CASES``; ``test_blocking_coverage.py`` keeps
the table and the built graph's blocking checks equal). Each case writes wrong
data where a real fault would leave it, in the landing zone or in the
warehouse, and never touches a check. The run starts at the first asset the
fault reaches and selects everything below it; the check must fail with
ERROR severity and show what it saw against what it wanted, Dagster must
build nothing downstream of the checked asset, and the gate must certify
nothing.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, ContextManager

import dagster as dg
import pytest

from atlasmart_dagster.domain.check_names import (
    AGG_MATCHES_FACT,
    CHANNEL_SPLIT_ADDS_UP,
    FACT_MATCHES_STAGING,
    GRAIN_UNIQUE,
    MANIFEST_ROWS_MATCH,
    MART_MATCHES_AGG_AND_METRIC,
    METRIC_MATCHES_AGG,
    NO_NEGATIVE_MONEY,
    QUALITY_WITHIN_THRESHOLDS,
    SOURCE_CONTRACT_CONFORMS,
    STAGED_ROWS_RECONCILE,
)
from atlasmart_dagster.domain.contracts import CONTRACTS
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.lanes import BACKFILL, LANE_TAG
from atlasmart_dagster.product.run_certification import certify_run
from atlasmart_dagster.store.ledger.partition_states import CERTIFIED
from atlasmart_dagster.store.tables import (
    AGG_DAILY_SALES,
    FACT_SALES,
    METRIC_GROSS_REVENUE,
    RAW_ORDER_LINES,
    STG_ORDER_LINES,
)
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch
from atlasmart_dagster_tests.warehouse_tampering import edit_stored_manifest, next_commit_loses_a_row, publish_changed

DAY = "2026-09-20"  # three paid lines: O1004/1 web 100.00, O1004/2 web 35.00, O1005/1 store 50.00
BATCH = "ERP-20260920-01"
# A channel no contract lists.
KIOSK = "kiosk"


@dataclass(frozen=True)
class Case:
    """A fault that one blocking check must catch.

    ``tamper`` writes the fault; what it returns (if anything) stays in force
    while the run executes (a fault of the write path). The run rebuilds
    ``first`` and everything below it; ``first=None`` runs the check alone on
    what is published, then everything below its asset. ``observed`` and
    ``expected`` are what the check must show for the day (dicts: the fields
    named must have these values).
    """

    check: dg.AssetCheckKey
    tamper: Callable[[Env], ContextManager | None]
    first: str | None
    observed: Any
    expected: Any
    loaded: bool = True  # the day is loaded and certified before the fault

    @property
    def id(self) -> str:
        return f"{self.check.asset_key.to_user_string()}:{self.check.name}"


def key(asset: str, name: str) -> dg.AssetCheckKey:
    return dg.AssetCheckKey(dg.AssetKey(asset), name)


# -- the faults ------------------------------------------------------------


def stored_manifest_promises_a_row_more(env: Env) -> None:
    """The raw store's copy of the day's manifest was edited after admission (expected_rows 3 -> 4).

    Readiness profiles a new delivery with the load's own reader, so a landed
    batch cannot disagree with its manifest; a replay from the raw store
    verifies the data file's hash, not the manifest's other fields. A
    manifest edited by hand, or taken from another copy of the same batch,
    is a fault only this check sees, when the day is replayed.
    """
    edit_stored_manifest(env.platform, DAY, expected_rows=4)


def erp_renames_a_field(env: Env) -> None:
    """The ERP renames a field of the v1 layout (schema drift), with a truthful manifest."""
    rows = read_rows(env.day_dir(DAY))
    for row in rows:
        row["gross_line_amount_usd"] = row.pop("line_amount_usd")
    write_batch(env.day_dir(DAY), rows, batch_id=BATCH)


def raw_partition_loses_a_row(env: Env) -> None:
    """The raw partition was republished one row short (a restore from an incomplete copy, a faulty rewrite).

    Staging then judges fewer rows than the day's manifest promised, and the
    gate's own accepted + quarantined = raw still holds: only the manifest
    side of the reconciliation can tell.
    """
    publish_changed(env.platform, RAW_ORDER_LINES, DAY, lambda rows: rows[:-1], "raw row lost")


def erp_upper_cases_the_channels(env: Env) -> None:
    """The ERP sends the day with its channel codes upper-cased (WEB, STORE): every row an unknown channel.

    The gate quarantines each row correctly; the day as a whole is unfit, and
    serving it would show zero sales.
    """
    rows = read_rows(env.day_dir(DAY))
    for row in rows:
        row["channel"] = row["channel"].upper()
    write_batch(env.day_dir(DAY), rows, batch_id=BATCH)


def staging_keeps_two_current_versions(env: Env) -> None:
    """Staging published a second *current* version of O1004/1 (a later source_seq, both is_current).

    The gate marks exactly one version current, so the fault can only enter
    with a staging partition written by something else (a faulty restatement,
    a hand repair): it is written into stg_order_lines and only fact_sales is
    rebuilt. Staging and the fact then agree on the controls; only the grain
    check sees two lines for one key.
    """

    def change(rows):
        line = next(r for r in rows if (r["order_id"], r["line_no"]) == ("O1004", 1))
        return rows + [{**line, "source_seq": line["source_seq"] + 1000, "source_row": 99}]

    publish_changed(env.platform, STG_ORDER_LINES, DAY, change, "two current versions")


def staging_lets_a_negative_amount_through(env: Env) -> None:
    """A current paid line with a negative amount reached staging (a refund sent as a sale, past the gate).

    The gate quarantines negative amounts, so the fault enters with a staging
    partition written by something else; only fact_sales is rebuilt from it.
    """

    def change(rows):
        for row in rows:
            if (row["order_id"], row["line_no"]) == ("O1005", 1):
                row["line_amount_usd"] = -row["line_amount_usd"]
        return rows

    publish_changed(env.platform, STG_ORDER_LINES, DAY, change, "negative amount")


def fact_write_loses_a_row(env: Env) -> ContextManager:
    """The fact's data file loses a row between the step writing it and the commit publishing it.

    fact_sales is a projection of the staging rows it reads, so what it
    computes always matches staging; what it *publishes* can differ only if
    the write is damaged (a torn write on a failing disk, another process
    rewriting the path). The check reads the published rows back, which is
    what it is for.
    """
    return next_commit_loses_a_row(env.platform, FACT_SALES, DAY)


def aggregate_published_with_wrong_cost(env: Env) -> None:
    """A bad publish of agg_daily_sales after its build (cost +10, profit -10: internally consistent).

    The check runs alone on what is published (reconciliation after a
    suspected fault), then the layers below.
    """

    def change(rows):
        rows[0]["cost_usd"] += 10
        rows[0]["gross_profit_usd"] -= 10
        return rows

    publish_changed(env.platform, AGG_DAILY_SALES, DAY, change, "cost")


def fact_carries_an_unknown_channel(env: Env) -> None:
    """A fact line under a channel no contract lists (O1005/1 sold at a "kiosk").

    The gate quarantines unknown channels, so the fault enters with a fact
    partition written by something else (a restore from a copy built under a
    wider channel list). The aggregate counts the line; the governed metric,
    whose definition counts contract channels only, does not.
    """

    def change(rows):
        for row in rows:
            if (row["order_id"], row["line_no"]) == ("O1005", 1):
                row["channel"] = KIOSK
        return rows

    publish_changed(env.platform, FACT_SALES, DAY, change, "unknown channel")


def metric_republished_ten_dollars_high(env: Env) -> None:
    """The governed metric republished with web revenue 10.00 high (a hand repair after its check passed).

    The marts take their revenue from the metric and everything else from the
    aggregate, so a mart rebuilt on it no longer carries the aggregate's tuple.
    """

    def change(rows):
        for row in rows:
            if row["channel"] == "web":
                row["value_usd"] += Decimal("10.00")
        return rows

    publish_changed(env.platform, METRIC_GROSS_REVENUE, DAY, change, "web revenue")


def metric_republished_with_web_as_kiosk(env: Env) -> None:
    """The governed metric republished with the web revenue under a channel the mart does not split ("kiosk").

    Its total still equals the aggregate's revenue, so the mart reconciles;
    the executive mart's channel columns no longer add up to its revenue.
    """

    def change(rows):
        for row in rows:
            if row["channel"] == "web":
                row["channel"] = KIOSK
        return rows

    publish_changed(env.platform, METRIC_GROSS_REVENUE, DAY, change, "channel")


CASES = [
    Case(key("raw_order_lines", MANIFEST_ROWS_MATCH), stored_manifest_promises_a_row_more, "raw_order_lines",
         observed=3, expected=4),
    Case(key("raw_order_lines", SOURCE_CONTRACT_CONFORMS), erp_renames_a_field, "raw_order_lines",
         observed={BATCH: {"contract": "v1", "missing": ["line_amount_usd"], "unexpected": ["gross_line_amount_usd"]}},
         expected={BATCH: list(CONTRACTS["v1"].source_fields)}, loaded=False),
    Case(key("stg_order_lines", STAGED_ROWS_RECONCILE), raw_partition_loses_a_row, "stg_order_lines",
         observed={"manifest_rows": 3, "raw_rows": 2, "accepted": 2, "quarantined": 0}, expected={"staged": 3}),
    Case(key("stg_order_lines", QUALITY_WITHIN_THRESHOLDS), erp_upper_cases_the_channels, "raw_order_lines",
         observed={"rows": 3, "accepted": 0, "reasons": {"unknown_channel": 3}}, expected={"min_accepted_share": 0.5},
         loaded=False),
    Case(key("fact_sales", GRAIN_UNIQUE), staging_keeps_two_current_versions, "fact_sales",
         observed={"duplicate_keys": 1}, expected={"duplicate_keys": 0}),
    Case(key("fact_sales", NO_NEGATIVE_MONEY), staging_lets_a_negative_amount_through, "fact_sales",
         observed={"negative_rows": 1}, expected={"negative_rows": 0}),
    Case(key("fact_sales", FACT_MATCHES_STAGING), fact_write_loses_a_row, "fact_sales",
         observed={"paid_lines": 2}, expected={"paid_lines": 3}),
    Case(key("agg_daily_sales", AGG_MATCHES_FACT), aggregate_published_with_wrong_cost, None,
         observed={"cost_usd": "140.00"}, expected={"cost_usd": "130.00"}),
    Case(key("metric_gross_revenue", METRIC_MATCHES_AGG), fact_carries_an_unknown_channel, "agg_daily_sales",
         observed={"revenue_usd": "135.00"}, expected={"revenue_usd": "185.00"}),
    Case(key("mart_finance_daily_sales", MART_MATCHES_AGG_AND_METRIC), metric_republished_ten_dollars_high,
         "mart_finance_daily_sales",
         observed={"revenue_usd": "195.00"}, expected={"revenue_usd": "185.00", "governed_revenue_usd": "195.00"}),
    Case(key("mart_executive_revenue", MART_MATCHES_AGG_AND_METRIC), metric_republished_ten_dollars_high,
         "mart_executive_revenue",
         observed={"revenue_usd": "195.00"}, expected={"revenue_usd": "185.00", "governed_revenue_usd": "195.00"}),
    Case(key("mart_executive_revenue", CHANNEL_SPLIT_ADDS_UP), metric_republished_with_web_as_kiosk,
         "mart_executive_revenue",
         observed={"sum_of_channels": "50.00"}, expected={"revenue_usd": "185.00"}),
]


# -- running a case ----------------------------------------------------------


def below(graph, asset: dg.AssetKey) -> set[dg.AssetKey]:
    """The materializable assets downstream of ``asset`` in the built graph (not ``asset`` itself)."""
    return set(dg.AssetSelection.assets(asset).downstream(include_self=False).materializable().resolve(graph))


def run_from(env: Env, case: Case) -> dg.ExecuteInProcessResult:
    """Run the built graph's asset job on ``case.first`` and everything below it (or the check alone and below)."""
    graph = env.defs.resolve_asset_graph()
    checked = case.check.asset_key
    assets = below(graph, checked)
    if case.first is not None:
        first = dg.AssetKey(case.first)
        assets |= {first} | below(graph, first)
    # a multi-asset builds all its assets or none (stg_order_lines and its quarantine)
    assets = set(dg.AssetSelection.assets(*assets).required_multi_asset_neighbors().resolve(graph))
    checks = {k for k in graph.asset_check_keys if k.asset_key in assets} | {case.check}
    job = env.defs.resolve_implicit_global_asset_job_def()
    job = job.get_subset(asset_selection=assets, asset_check_selection=checks)
    return job.execute_in_process(instance=env.instance, partition_key=DAY, tags={LANE_TAG: BACKFILL},
                                  raise_on_error=False)


def materialized(result) -> set[dg.AssetKey]:
    return {e.asset_key for e in result.get_asset_materialization_events()}


def assert_shows(shown: Any, wanted: Any) -> None:
    if isinstance(wanted, dict):
        assert {k: shown.get(k) for k in wanted} == wanted, shown
    else:
        assert shown == wanted


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_a_fault_fails_its_blocking_check_and_nothing_below_builds_or_certifies(env, case):
    graph = env.defs.resolve_asset_graph()
    assert graph.get_check_spec(case.check).blocking
    if case.loaded:
        assert run_chain(env.defs, env.instance, env.platform, [DAY], lane=BACKFILL).success
    certifications_before = env.ledger.partitions.events(states=(CERTIFIED,))

    with case.tamper(env) or nullcontext():
        result = run_from(env, case)

    assert not result.success
    failed = [e for e in result.get_asset_check_evaluations() if not e.passed]
    assert [e.asset_check_key for e in failed] == [case.check], "only the case's check fails"
    (evaluation,) = failed
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR
    shown = evaluation.metadata["observed_vs_expected"].value[DAY]
    assert shown["passed"] is False
    assert_shows(shown["observed"], case.observed)
    assert_shows(shown["expected"], case.expected)

    downstream = below(graph, case.check.asset_key)
    assert not materialized(result) & downstream, "Dagster built an asset below the failed check"
    assert (case.check.asset_key in materialized(result)) == (case.first is not None)  # checked what it published

    decisions = certify_run(env.platform, result.run_id, result.success)
    assert not [d for d in decisions if d.certified]
    for decision in decisions:  # a certified product the run built: refused for the failed check
        assert any(f"blocking check {case.id} failed" in reason for reason in decision.reasons), decision.reasons
    assert env.ledger.partitions.events(states=(CERTIFIED,)) == certifications_before
