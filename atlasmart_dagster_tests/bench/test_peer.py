"""The dagster-dbt peer is a real peer: it reproduces the generated answers, and its dbt tests can fail.

The peer's dbt project restates the contract in its vars; a test keeps the two
equal. Tests that run dbt need the ``bench`` extra and are skipped without it.
"""

import ast
import json
import shutil
from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml

from atlasmart_dagster.bench import peer
from atlasmart_dagster.bench.generator import generate, plan_day
from atlasmart_dagster.domain.contracts import CANONICAL_FIELDS, CHANNELS, MAX_LINE_USD, MAX_QUANTITY, PAID_STATUS, STATUSES
from atlasmart_dagster.domain.controls import ControlTuple
from atlasmart_dagster.domain.governed_metrics import GROSS_REVENUE

PACKAGE = Path(__file__).resolve().parents[2] / "atlasmart_dagster"
needs_dbt = pytest.mark.skipif(not peer.installed(), reason=peer.NOT_INSTALLED)


def test_the_dbt_project_states_the_same_contract_and_metric():
    project = yaml.safe_load((peer.PROJECT_DIR / "dbt_project.yml").read_text())
    v = project["vars"]
    assert [(f["name"], f["type"]) for f in v["contract_fields"]] == [(f.name, f.sql_type) for f in CANONICAL_FIELDS]
    assert tuple(v["channels"]) == CHANNELS and tuple(v["statuses"]) == STATUSES and v["paid_status"] == PAID_STATUS
    assert (v["max_quantity"], v["max_line_usd"]) == (MAX_QUANTITY, MAX_LINE_USD)
    assert (v["metric_name"], v["metric_version"]) == (GROSS_REVENUE.name, GROSS_REVENUE.version)


def _imported_roots(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_peer_modules_import_dbt_and_the_runner_imports_them_lazily():
    outside = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
               if not p.name.startswith("peer") and _imported_roots(p) & {"dbt", "dagster_dbt"}]
    assert not outside, f"dbt imported outside bench/peer*.py: {outside}"
    runner = ast.parse((PACKAGE / "bench" / "runner.py").read_text())
    top_level = [n for n in runner.body if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("peer")]
    assert not top_level, "the runner imports the peer at module level"


def test_without_the_bench_extra_the_peer_column_says_so(monkeypatch, tmp_path):
    from atlasmart_dagster.bench import runner

    monkeypatch.setattr(peer, "installed", lambda: False)
    assert runner._prepare_peer(tmp_path, tmp_path / "landing") == (None, peer.NOT_INSTALLED)
    scenario = runner.QUICK[1]
    columns = runner._peer_result(scenario, [], 1.0, scenario.rows, 1, peer.NOT_INSTALLED)
    assert columns["peer_status"] == peer.NOT_INSTALLED and columns["peer_correct"] is None
    row = {**{k: v for k, v in vars(scenario).items()}, "repeats": 1, "partitions": 1, "total_rows": scenario.rows,
           "reference_seconds": 0.3, "ours_seconds": 1.0, "ratio": 3.3, "met": False, "rows_per_second": 100_000,
           "seconds_per_partition": 1.0, "ours_certify_seconds": 0.1, "reference_peak_rss_mb": 300,
           "ours_peak_rss_mb": 350, "ours_correct": True, "reference_correct": True, **columns}
    machine = {"cpu": "x", "cores": 2, "memory_gb": 1, "python": "3", "dagster": "1", "duckdb": "2", "pyiceberg": "0",
               "pyarrow": "2", "dagster_dbt": None}
    assert f"| day_100k | {peer.NOT_INSTALLED} |" in runner.markdown({"machine": machine, "quick": True,
                                                                         "results": [row]})


@pytest.fixture(scope="module")
def peer_run(tmp_path_factory):
    """Two generated days built by the peer in one run (a range), against a manifest prepared once."""
    root = tmp_path_factory.mktemp("peer")
    expected = generate(root / "gen", 2, 2_000)
    days = sorted(expected["days"])
    landing = root / "gen" / "landing"
    target = root / "target"
    result = peer.run_peer(root / "work", landing, days, days[0], target)
    return {"root": root, "landing": landing, "target": target, "days": days, "expected": expected, "result": result}


def _con(path: Path):
    import duckdb

    return duckdb.connect(str(path), read_only=True)


@needs_dbt
def test_the_peer_reproduces_the_generated_answers(peer_run):
    result, expected, days = peer_run["result"], peer_run["expected"], peer_run["days"]
    assert result["success"], result["failures"]
    assert result["runs"] == 1 and result["checks_passed"] == 6  # every dbt test ran as an asset check and passed
    for day in days:
        assert ControlTuple.from_mapping(result["controls"][day]) == ControlTuple.from_mapping(expected["days"][day]["controls"])
    con = _con(peer_run["root"] / "work" / "peer.duckdb")
    try:
        staged = dict(con.sql("SELECT CAST(sales_date AS VARCHAR), count(*) FROM stg_order_lines GROUP BY 1").fetchall())
        reasons = con.sql("SELECT reason, count(*) FROM quarantine_order_lines WHERE sales_date = "
                          f"DATE '{days[0]}' GROUP BY 1").fetchall()
        marts = con.execute("SELECT count(*), sum(revenue_usd) FROM mart_finance_daily_sales").fetchone()
        executive = con.execute("SELECT sum(revenue_usd) FROM mart_executive_revenue").fetchone()[0]
    finally:
        con.close()
    assert staged == {d: expected["days"][d]["accepted"] for d in days}
    plan = plan_day(days[0], 2_000)
    assert dict(reasons) == {"duplicate_key": plan.duplicates, "non_positive_quantity": plan.bad // 4,
                             "null_required_field": plan.bad // 4, "negative_amount": plan.bad // 4,
                             "unknown_channel": plan.bad // 4}
    revenue = sum(ControlTuple.from_mapping(expected["days"][d]["controls"]).revenue_usd for d in days)
    assert marts == (2, revenue) and executive == revenue


@needs_dbt
def test_the_grain_test_fails_on_a_duplicate_and_stops_the_chain(peer_run, tmp_path):
    """Make every staged version current: the fact gets duplicate keys, its grain test fails, the aggregate waits."""
    import dagster as dg
    import duckdb

    day = peer_run["days"][0]
    shutil.copy(peer_run["root"] / "work" / "peer.duckdb", tmp_path / "peer.duckdb")
    con = duckdb.connect(str(tmp_path / "peer.duckdb"))
    con.execute(f"UPDATE stg_order_lines SET is_current = true WHERE sales_date = DATE '{day}'")
    agg_before = con.execute(f"SELECT paid_lines FROM agg_daily_sales WHERE sales_date = DATE '{day}'").fetchone()
    con.close()
    env = peer.peer_environment(tmp_path, peer_run["landing"], peer_run["target"])
    with peer.environment(env):
        defs = peer.build_peer_definitions(peer_run["target"], peer_run["days"][0])
        result = dg.materialize(list(defs.assets), resources=defs.resources, partition_key=day, run_config=peer.QUIET,
                                selection=dg.AssetSelection.assets("fact_sales").downstream(), raise_on_error=False)
    assert not result.success
    failed = {e.check_name for e in result.get_asset_check_evaluations() if not e.passed}
    assert failed == {"fact_sales_grain_is_order_line"}
    con = _con(tmp_path / "peer.duckdb")
    try:
        assert con.execute(f"SELECT paid_lines FROM agg_daily_sales WHERE sales_date = DATE '{day}'").fetchone() == agg_before
    finally:
        con.close()


@needs_dbt
def test_the_reconciliation_test_fails_when_the_aggregate_disagrees_with_the_fact(peer_run, tmp_path):
    import duckdb
    from dagster_dbt import DbtCliResource

    day = peer_run["days"][1]
    shutil.copy(peer_run["root"] / "work" / "peer.duckdb", tmp_path / "peer.duckdb")
    con = duckdb.connect(str(tmp_path / "peer.duckdb"))
    con.execute(f"UPDATE agg_daily_sales SET revenue_usd = revenue_usd + 0.01 WHERE sales_date = DATE '{day}'")
    con.close()
    window = json.dumps({"min_date": day, "max_date": (date.fromisoformat(day) + timedelta(days=1)).isoformat()})
    env = peer.peer_environment(tmp_path, peer_run["landing"], peer_run["target"])
    with peer.environment(env):
        dbt = DbtCliResource(project_dir=peer.dbt_project(peer_run["target"]))
        invocation = dbt.cli(["test", "--select", "assert_agg_daily_sales_reconciles_with_fact", "--vars", window],
                             raise_on_error=False).wait()
    statuses = {r["unique_id"].split(".")[-1]: r["status"] for r in invocation.get_artifact("run_results.json")["results"]}
    assert statuses == {"assert_agg_daily_sales_reconciles_with_fact": "fail"}
