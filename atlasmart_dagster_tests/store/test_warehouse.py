"""The warehouse: one snapshot per partition replacement, and caches that never serve a stale version."""

from datetime import date
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from atlasmart_dagster.store.home import AtlasmartHome
from atlasmart_dagster.store.tables import AGG_DAILY_SALES
from atlasmart_dagster.store.warehouse import Warehouse, duckdb_connection


def _agg(day: str, revenue: str) -> pa.Table:
    row = {
        "sales_date": date.fromisoformat(day),
        "paid_lines": 1,
        "orders": 1,
        "units": 1,
        "revenue_usd": Decimal(revenue),
        "cost_usd": Decimal("1.00"),
        "gross_profit_usd": Decimal(revenue) - Decimal("1.00"),
    }
    names = AGG_DAILY_SALES.column_names
    return AGG_DAILY_SALES.conform(pa.Table.from_pylist([{n: row.get(n) for n in names}]))


def _revenue(warehouse: Warehouse, day: str, snapshot_id: int | None = None) -> list[Decimal]:
    return warehouse.read(AGG_DAILY_SALES, [day], snapshot_id).column("revenue_usd").to_pylist()


def test_replacing_a_partition_is_one_overwrite_snapshot_that_never_shows_it_empty(tmp_path):
    warehouse = Warehouse(AtlasmartHome(tmp_path))
    first = warehouse.overwrite(AGG_DAILY_SALES, _agg("2026-09-20", "185.00"), ["2026-09-20"])
    warehouse.overwrite(AGG_DAILY_SALES, _agg("2026-09-21", "60.00"), ["2026-09-21"])
    before = warehouse.snapshots(AGG_DAILY_SALES)
    replaced = warehouse.overwrite(AGG_DAILY_SALES, _agg("2026-09-20", "175.00"), ["2026-09-20"])
    after = warehouse.snapshots(AGG_DAILY_SALES)

    assert len(after) == len(before) + 1
    assert after[-1]["operation"] == "overwrite" and after[-1]["snapshot_id"] == replaced
    # every snapshot in the history holds the day: none shows it deleted but not yet re-added
    for snapshot in after:
        assert len(_revenue(warehouse, "2026-09-20", snapshot["snapshot_id"])) == 1
    assert _revenue(warehouse, "2026-09-20") == [Decimal("175.00")]
    assert _revenue(warehouse, "2026-09-20", first) == [Decimal("185.00")]
    assert _revenue(warehouse, "2026-09-21") == [Decimal("60.00")]
    assert warehouse.partition_row_counts(AGG_DAILY_SALES, ["2026-09-20", "2026-09-21"]) == {
        "2026-09-20": 1,
        "2026-09-21": 1,
    }


def test_caches_follow_commits_made_by_another_process(tmp_path):
    """Two Warehouse objects on one home stand for two processes: each must see the other's commits."""
    home = AtlasmartHome(tmp_path)
    ours, theirs = Warehouse(home), Warehouse(home)
    ours.overwrite(AGG_DAILY_SALES, _agg("2026-09-20", "185.00"), ["2026-09-20"])
    assert _revenue(ours, "2026-09-20") == [Decimal("185.00")]  # table and plan now cached
    assert _revenue(theirs, "2026-09-20") == [Decimal("185.00")]

    theirs.overwrite(AGG_DAILY_SALES, _agg("2026-09-20", "130.00"), ["2026-09-20"])
    assert ours.current_snapshot_id(AGG_DAILY_SALES) == theirs.current_snapshot_id(AGG_DAILY_SALES)
    assert _revenue(ours, "2026-09-20") == [Decimal("130.00")]


def test_a_cached_plan_is_not_served_for_an_expired_snapshot(tmp_path):
    warehouse = Warehouse(AtlasmartHome(tmp_path))
    old = warehouse.overwrite(AGG_DAILY_SALES, _agg("2026-09-20", "185.00"), ["2026-09-20"])
    assert warehouse.data_files(AGG_DAILY_SALES, ["2026-09-20"], old)  # planned and cached
    warehouse.overwrite(AGG_DAILY_SALES, _agg("2026-09-20", "130.00"), ["2026-09-20"])
    warehouse.table(AGG_DAILY_SALES).maintenance.expire_snapshots().by_id(old).commit()

    assert warehouse.data_files(AGG_DAILY_SALES, ["2026-09-20"], old) == []
    assert _revenue(warehouse, "2026-09-20") == [Decimal("130.00")]


def test_a_day_filter_selects_exactly_its_days_at_every_length():
    """Short lists are a literal IN list, long ones a semi-join (cheaper at a year of day files): same rows."""
    from datetime import timedelta

    from atlasmart_dagster.store.warehouse import day_filter

    first = date(2025, 12, 1)
    con = duckdb_connection()
    try:
        con.execute(f"CREATE TEMP TABLE days AS SELECT DATE '{first}' + (i % 120)::INTEGER AS sales_date, i "
                    "FROM range(1200) r(i)")
        for length in (1, 2, 48, 49, 90, 365):
            # every third day from the 5th, running past the table's last day (those match nothing)
            asked = [(first + timedelta(days=5 + 3 * k)).isoformat() for k in range(length)]
            found = con.sql(f"SELECT DISTINCT sales_date::VARCHAR FROM days WHERE {day_filter('sales_date', asked)}")
            assert sorted(row[0] for row in found.fetchall()) == [d for d in asked if d < "2026-03-31"], length
        assert con.sql(f"SELECT count(*) FROM days WHERE {day_filter('sales_date', [])}").fetchall() == [(0,)]
    finally:
        con.close()


def test_reading_many_days_returns_those_days_only(tmp_path):
    warehouse = Warehouse(AtlasmartHome(tmp_path))
    days = [date.fromordinal(date(2026, 1, 1).toordinal() + i).isoformat() for i in range(60)]
    warehouse.overwrite(AGG_DAILY_SALES, pa.concat_tables([_agg(d, "10.00") for d in days]), days)
    asked = days[::2] + days[1:40:2]  # 50 days, out of order
    read = warehouse.read(AGG_DAILY_SALES, asked).column("sales_date").to_pylist()
    assert sorted(d.isoformat() for d in read) == sorted(asked)


def _agg_sql(day: str, revenue: str) -> str:
    return (f"SELECT DATE '{day}' AS sales_date, 1 AS paid_lines, 1 AS orders, 1 AS units, {revenue} AS revenue_usd, "
            f"1.00 AS cost_usd, {revenue} - 1.00 AS gross_profit_usd")


def test_days_written_from_queries_of_their_own_are_the_files_of_one_range_query(tmp_path):
    """overwrite_sql with a query per day (raw's path) writes the files a query of the whole range writes."""
    days = ["2026-01-01", "2026-01-02", "2026-01-03"]
    one, each = Warehouse(AtlasmartHome(tmp_path / "one")), Warehouse(AtlasmartHome(tmp_path / "each"))
    con = duckdb_connection()
    try:
        one.overwrite_sql(AGG_DAILY_SALES, con, " UNION ALL ".join(_agg_sql(d, "10.00") for d in days), days)
        each.overwrite_sql(AGG_DAILY_SALES, con, {d: _agg_sql(d, "10.00") for d in days}, days)
    finally:
        con.close()

    def files(warehouse):
        return sorted((Path(f).parent.name, Path(f).name, Path(f).read_bytes()) for f in warehouse.data_files(AGG_DAILY_SALES))

    assert len(files(each)) == 3 and files(each) == files(one)


def test_a_day_query_with_a_stray_row_publishes_no_day(tmp_path):
    warehouse = Warehouse(AtlasmartHome(tmp_path))
    days = ["2026-01-01", "2026-01-02"]
    warehouse.overwrite(AGG_DAILY_SALES, pa.concat_tables([_agg(d, "10.00") for d in days]), days)
    before = warehouse.snapshots(AGG_DAILY_SALES)
    con = duckdb_connection()
    try:
        stray = {"2026-01-01": _agg_sql("2026-01-01", "20.00"), "2026-01-02": _agg_sql("2026-01-05", "20.00")}
        with pytest.raises(ValueError, match="outside the partition 2026-01-02"):
            warehouse.overwrite_sql(AGG_DAILY_SALES, con, stray, days)
        with pytest.raises(ValueError, match="not being replaced"):
            warehouse.overwrite_sql(AGG_DAILY_SALES, con, {"2026-01-03": _agg_sql("2026-01-03", "20.00")}, days)
    finally:
        con.close()
    assert warehouse.snapshots(AGG_DAILY_SALES) == before
    assert sorted(_revenue(warehouse, d)[0] for d in days) == [Decimal("10.00"), Decimal("10.00")]


def _fact_day_sql(day: str, lines: int) -> str:
    """``lines`` paid lines of ``day`` over lines // 3 + 1 orders, one an hour early (event-day drift)."""
    return (
        f"SELECT DATE '{day}' AS sales_date, 'O' || (i // 3) AS order_id, (i % 3)::INTEGER AS line_no, "
        f"TIMESTAMPTZ '{day} 00:30:00+00' - CASE WHEN i = 0 THEN INTERVAL 1 HOUR ELSE INTERVAL 0 HOUR END AS event_ts, "
        f"'C1' AS customer_id, 'P1' AS product_id, 'web' AS channel, (i % 4 + 1)::INTEGER AS quantity, "
        f"(i * 1.25)::DECIMAL(18,2) AS revenue_usd, (i * 0.5)::DECIMAL(18,2) AS cost_usd, "
        f"(i * 0.75)::DECIMAL(18,2) AS gross_profit_usd, 'B1' AS batch_id, i::BIGINT AS source_seq FROM range({lines}) r(i)"
    )


def test_per_day_reads_of_a_range_go_a_chunk_of_days_at_a_time_with_the_same_figures(tmp_path):
    """Controls, drift and fingerprints of many days read in chunks of rows equal one read of them all.

    One query over a range holds every day's groups at once (three years of the fact took 3.2 GB);
    a chunk at a time keeps the read's memory that of one chunk.
    """
    from atlasmart_dagster.product.published_controls import controls_of, fact_controls_and_drift_of, fingerprints_of
    from atlasmart_dagster.store.tables import FACT_SALES

    lines = {date.fromordinal(date(2026, 1, 1).toordinal() + i).isoformat(): 40 + 10 * (i % 5) for i in range(12)}
    home = AtlasmartHome(tmp_path)
    whole, chunked = Warehouse(home), Warehouse(home, chunk_rows=130)
    con = duckdb_connection()
    try:
        whole.overwrite_sql(FACT_SALES, con, {d: _fact_day_sql(d, n) for d, n in lines.items()}, list(lines))
    finally:
        con.close()
    asked = [*lines][::-1] + ["2026-02-01"]  # out of order, and a day with no rows

    chunks = chunked.read_chunks(FACT_SALES, asked)
    assert len(chunks) > 3 and sorted(d for c in chunks for d in c) == sorted(asked)
    assert all(len(c) == 1 or sum(lines.get(d, 0) for d in c) <= 130 for c in chunks)
    assert whole.read_chunks(FACT_SALES, asked) == [sorted(asked)]
    for read in (controls_of, fingerprints_of):
        assert read(chunked, FACT_SALES, asked) == read(whole, FACT_SALES, asked)
    assert fact_controls_and_drift_of(chunked, asked) == fact_controls_and_drift_of(whole, asked)
    figures = fact_controls_and_drift_of(chunked, asked)
    assert figures["2026-01-01"][0].paid_lines == 40 and figures["2026-01-01"][1] == 1
    assert figures["2026-02-01"][0].paid_lines == 0


@pytest.mark.parametrize("racing", ["main commit meets a branch commit", "branch commit meets a main commit"])
def test_a_commit_that_another_ref_overtook_is_redone_from_the_new_head(tmp_path, racing):
    """A run commits main while the certification sensor publishes the certified branch (or the other way round).

    pyiceberg checks only the committing ref's head, so the commit built on the older metadata passes that
    and is refused for its stale sequence number (a ValueError, not CommitFailedException). CI saw a mart
    step fail so in the team deployment; it must be redone from the new head like any lost race.
    """
    from atlasmart_dagster.store import warehouse as warehouse_module

    home = AtlasmartHome(tmp_path)
    ours, theirs = Warehouse(home), Warehouse(home)  # two processes
    first = ours.overwrite(AGG_DAILY_SALES, _agg("2026-09-20", "185.00"), ["2026-09-20"])
    second = ours.overwrite(AGG_DAILY_SALES, _agg("2026-09-21", "60.00"), ["2026-09-21"])
    ours.publish_branch(AGG_DAILY_SALES, "certified", {"2026-09-20": first}, table_properties={},
                        snapshot_properties={})

    def commit_main(warehouse: Warehouse) -> None:
        warehouse.overwrite(AGG_DAILY_SALES, _agg("2026-09-22", "75.00"), ["2026-09-22"])

    def publish_branch(warehouse: Warehouse) -> None:
        warehouse.publish_branch(AGG_DAILY_SALES, "certified", {"2026-09-21": second}, table_properties={},
                                 snapshot_properties={})

    ours_commits, theirs_first = (commit_main, publish_branch) if racing.startswith("main") else \
        (publish_branch, commit_main)
    fired = []

    def the_other_ref_commits_first(_home, name: str) -> None:
        if not fired:  # once, inside our commit: the other's own commit comes back here
            fired.append(name)
            theirs_first(theirs)

    warehouse_module.COMMIT_HOOKS.append(the_other_ref_commits_first)
    try:
        ours_commits(ours)
    finally:
        warehouse_module.COMMIT_HOOKS.remove(the_other_ref_commits_first)

    assert fired  # the race happened
    reader = Warehouse(home)
    branch = reader.table(AGG_DAILY_SALES).metadata.refs["certified"].snapshot_id
    assert _revenue(reader, "2026-09-20", branch) == [Decimal("185.00")]
    assert _revenue(reader, "2026-09-21", branch) == [Decimal("60.00")]
    assert _revenue(reader, "2026-09-22") == [Decimal("75.00")]
