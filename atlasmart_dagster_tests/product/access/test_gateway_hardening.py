"""The gateway's hardening: certified facts only, SQL identifier resolution, query limits, clean errors."""

import os
import time

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.errors import UsageError
from atlasmart_dagster.product.access.access_log import access_log
from atlasmart_dagster.product.access.gateway import Gateway, QueryError, QueryLimits
from atlasmart_dagster.product.access.policy import CERTIFIED, ROLES, AccessDenied, Grant, Role, validate_policy
from atlasmart_dagster.ops.runs.chains import run_chain, run_reference
from atlasmart_dagster.store.tables import FACT_SALES, MART_FINANCE_DAILY_SALES
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env

CERTIFIED_DAYS, UNCERTIFIED_DAY = SAMPLE_DAYS[:-1], SAMPLE_DAYS[-1]
NEVER_ENDS = "SELECT max(i * 2) AS m FROM range(20000000000) t(i)"


def _partly_certified(root) -> Env:
    """The sample with every day loaded, the last one never certified."""
    env = Env(root)
    assert run_reference(env.defs, env.instance)
    assert run_chain(env.defs, env.instance, env.platform, CERTIFIED_DAYS, lane="backfill").success
    assert run_chain(env.defs, env.instance, env.platform, [UNCERTIFIED_DAY], lane="backfill", certify=False).success
    return env


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Shared by the tests that do not change the warehouse."""
    return _partly_certified(tmp_path_factory.mktemp("hardening"))


def _days(gateway: Gateway, who: str, relation: str) -> set[str]:
    rows = gateway.query(who, f"SELECT DISTINCT CAST(sales_date AS VARCHAR) AS d FROM {relation}").to_pylist()
    return {r["d"] for r in rows}


def _last_log(world) -> dict:
    return access_log(world.ledger)[-1]


# -- finding 9: certified versions only --------------------------------------------------------------


def test_finance_analyst_reads_facts_at_their_certified_version_only(tmp_path):
    world = _partly_certified(tmp_path)  # its own: the test changes published facts
    gateway = Gateway(world.platform)
    # the uncertified day is published (the engineering view) but absent for the analyst
    assert UNCERTIFIED_DAY in _days(gateway, "etl_service", "fact_sales")
    assert _days(gateway, "finance_analyst", "fact_sales") == set(CERTIFIED_DAYS)
    assert _days(gateway, "finance_analyst", "mart_finance_daily_sales") == set(CERTIFIED_DAYS)

    # an uncertified change to a certified day is not what the analyst reads either
    day = "2026-09-20"
    published = world.warehouse.read(FACT_SALES, [day])
    world.warehouse.overwrite(FACT_SALES, published.slice(0, published.num_rows - 1), [day])
    count = f"SELECT count(*) AS n, sum(revenue_usd) AS r FROM fact_sales WHERE sales_date = DATE '{day}'"
    assert gateway.query("etl_service", count).to_pylist()[0]["n"] == 2
    assert [tuple(r.values()) for r in gateway.query("finance_analyst", count).to_pylist()] == [(3, 185)]


def test_grants_are_certified_unless_the_policy_says_otherwise():
    assert Grant("fact_sales").version == CERTIFIED
    assert ROLES["finance_analyst"].readable["fact_sales"].version == CERTIFIED
    # a certified read of a relation that is not itself certified must name the product it is read through
    assert validate_policy({"r": Role("r", "a role", (Grant("fact_sales"),))}, {}) == [
        "r reads fact_sales certified but names no certified product to read it through"
    ]
    assert validate_policy() == []


# -- finding 7: identifiers resolve as in SQL ---------------------------------------------------------


@pytest.mark.parametrize("who,relation", [
    ("bi_reader", "Mart_Finance_Daily_Sales"),
    ("bi_reader", '"MART_FINANCE_DAILY_SALES"'),
    ("bi_reader", "main.mart_finance_daily_sales"),
    ("bi_reader", "memory.main.mart_finance_daily_sales"),
    ("bi_reader", "MEMORY.Main.Metric_Gross_Revenue"),
    ("finance_analyst", "memory.main.fact_sales"),
    ("finance_analyst", "main.Fact_Sales"),
    ("etl_service", "memory.main.STG_ORDER_LINES"),
])
def test_granted_relations_resolve_case_insensitively_and_qualified(world, who, relation):
    result = Gateway(world.platform).query(who, f"SELECT count(*) AS n FROM {relation}")
    assert result.column("n").to_pylist()[0] > 0
    assert _last_log(world)["decision"] == "allow"


@pytest.mark.parametrize("who,relation", [
    ("bi_reader", "FACT_SALES"),
    ("bi_reader", "memory.main.Fact_Sales"),
    ("bi_reader", '"memory"."main"."dim_customer"'),
    ("etl_service", "Memory.Main.Mart_Finance_Daily_Sales"),
    ("etl_service", "system.main.mart_finance_daily_sales"),
])
def test_ungranted_relations_stay_denied_under_any_spelling(world, who, relation):
    with pytest.raises(AccessDenied) as info:
        Gateway(world.platform).query(who, f"SELECT count(*) AS n FROM {relation}")
    assert relation.lower().split(".")[-1].strip('"') not in str(info.value).lower()
    assert _last_log(world)["decision"] == "deny"


# -- finding 6: runtime errors are one clean, logged line ---------------------------------------------


@pytest.mark.parametrize("sql,says", [
    ("SELECT CAST('avery@example.invalid' AS INTEGER) AS x FROM mart_finance_daily_sales", "conversion"),
    ("SELECT DATE '2026-13-45' AS d FROM mart_finance_daily_sales", "date field value out of range"),
    ("SELECT 9223372036854775807::BIGINT + paid_lines AS x FROM mart_finance_daily_sales", "overflow"),
])
def test_runtime_errors_are_one_clean_logged_line(world, sql, says):
    before = len(access_log(world.ledger))
    with pytest.raises(QueryError) as info:
        Gateway(world.platform).query("bi_reader", sql)
    message = str(info.value)
    assert says in message.lower() and "\n" not in message and str(world.home) not in message
    log = access_log(world.ledger)[before:]
    assert [(e["role"], e["decision"]) for e in log] == [("bi_reader", "error")]
    # the reason names the kind of error, never the statement's literals (they can hold PII)
    assert "avery" not in log[0]["reason"] and "2026-13-45" not in log[0]["reason"] and log[0]["reason"]


def test_an_unreadable_certified_file_is_a_clean_error_naming_no_path(world):
    data_file = world.warehouse.data_files(MART_FINANCE_DAILY_SALES, [CERTIFIED_DAYS[0]])[0]
    moved = data_file + ".away"
    before = len(access_log(world.ledger))
    os.rename(data_file, moved)
    try:
        with pytest.raises(QueryError) as info:
            Gateway(world.platform).query("bi_reader", "SELECT count(*) AS n FROM mart_finance_daily_sales")
    finally:
        os.rename(moved, data_file)
    message = str(info.value)
    assert "\n" not in message
    for leak in (str(world.home), "warehouse", ".parquet", data_file.split("/")[-1]):
        assert leak not in message
    log = access_log(world.ledger)[before:]
    assert [e["decision"] for e in log] == ["error"]
    assert str(world.home) not in log[0]["reason"] and ".parquet" not in log[0]["reason"]


def test_cli_prints_one_line_and_exits_non_zero(world, capsys):
    with pytest.raises(SystemExit) as info:
        main(["--home", str(world.home), "--landing", str(world.landing), "query", "--as", "bi_reader",
              "SELECT CAST('x' AS INTEGER) AS x FROM mart_finance_daily_sales"])
    assert isinstance(info.value.code, str) and info.value.code.startswith("error: ")
    assert "\n" not in info.value.code and "Traceback" not in capsys.readouterr().err


# -- finding 8: time and memory limits ----------------------------------------------------------------


def test_a_query_over_its_time_limit_is_stopped_reported_and_logged(world):
    gateway = Gateway(world.platform, QueryLimits(timeout_s=0.5))
    started = time.monotonic()
    with pytest.raises(QueryError) as info:
        gateway.query("bi_reader", NEVER_ENDS)
    assert time.monotonic() - started < 10
    assert "time limit of 0.5 s" in str(info.value)
    assert (_last_log(world)["decision"], _last_log(world)["reason"]) == ("error", "time limit exceeded")
    # the engine is not left broken: the next query runs
    assert gateway.query("bi_reader", "SELECT count(*) AS n FROM mart_finance_daily_sales").to_pylist() == [{"n": 4}]


@pytest.mark.parametrize("sql", [
    "SELECT list(i) AS l FROM range(50000000) t(i)",  # the engine's own memory
    "SELECT i FROM range(50000000) t(i)",  # the result handed back
])
def test_a_query_over_its_memory_limit_is_stopped_reported_and_logged(world, sql):
    with pytest.raises(QueryError) as info:
        Gateway(world.platform, QueryLimits(memory="64MB")).query("bi_reader", sql)
    assert "memory limit of 64MB" in str(info.value)
    assert (_last_log(world)["decision"], _last_log(world)["reason"]) == ("error", "memory limit exceeded")


def test_limits_come_from_the_environment_with_sane_defaults():
    assert QueryLimits.from_env({}) == QueryLimits(timeout_s=30.0, memory="1GB")
    assert QueryLimits.from_env({"ATLASMART_QUERY_TIMEOUT_S": "2.5", "ATLASMART_QUERY_MEMORY": "512MB"}) == \
        QueryLimits(timeout_s=2.5, memory="512MB")
    assert QueryLimits(memory="1.5GiB").memory_bytes == int(1.5 * 2**30)
    for env in ({"ATLASMART_QUERY_TIMEOUT_S": "soon"}, {"ATLASMART_QUERY_TIMEOUT_S": "0"},
                {"ATLASMART_QUERY_MEMORY": "lots"}, {"ATLASMART_QUERY_MEMORY": "-1GB"}):
        with pytest.raises(UsageError, match=next(iter(env))):
            QueryLimits.from_env(env)


def test_cli_limits_from_flags_and_environment(world, monkeypatch, capsys):
    argv = ["--home", str(world.home), "--landing", str(world.landing), "query", "--as", "bi_reader"]
    with pytest.raises(SystemExit) as info:
        main([*argv, "--timeout", "0.5", NEVER_ENDS])
    assert info.value.code == "error: the query exceeded the time limit of 0.5 s and was stopped"
    assert main([*argv, "--timeout", "0", "SELECT 1"]) == 2  # a setting error is a usage error
    assert capsys.readouterr().err.startswith("atlasmart: error: --timeout must be a number of seconds above 0")
    monkeypatch.setenv("ATLASMART_QUERY_MEMORY", "64MB")
    with pytest.raises(SystemExit) as info:
        main([*argv, "SELECT list(i) AS l FROM range(50000000) t(i)"])
    assert "memory limit of 64MB" in info.value.code
    monkeypatch.setenv("ATLASMART_QUERY_MEMORY", "plenty")
    assert main([*argv, "SELECT 1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("atlasmart: error: ATLASMART_QUERY_MEMORY") and err.count("\n") == 1
