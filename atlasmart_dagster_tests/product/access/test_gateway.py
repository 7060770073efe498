"""Every denied (role, relation) pair, attacked along every obvious and less obvious path."""

import json

import pytest

from atlasmart_dagster.product.access.access_log import access_log
from atlasmart_dagster.product.access.gateway import Gateway
from atlasmart_dagster.product.access.policy import PRINCIPALS, ROLES, AccessDenied, matrix, principal_for, validate_policy
from atlasmart_dagster.ops.runs.chains import run_chain, run_reference
from atlasmart_dagster.store.tables import TABLES_BY_NAME
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env

PII = ["Avery Synthetic", "avery@example.invalid", "Blake Synthetic", "blake@example.invalid", "Synthetic",
       "example.invalid"]


def _loaded(root) -> Env:
    env = Env(root)
    assert run_reference(env.defs, env.instance)
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").success
    return env


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Shared by the read-only tests."""
    return _loaded(tmp_path_factory.mktemp("gateway"))


DENIED = [(role, rel) for rel, cells in matrix().items() for role, cell in cells.items() if cell == "deny"]
ALLOWED = [(role, rel) for rel, cells in matrix().items() for role, cell in cells.items() if cell != "deny"]


def a_granted(role: str, besides: str) -> str:
    return next(r for r in ROLES[role].readable if r != besides)


def bypasses(world, role: str, rel: str) -> dict[str, str]:
    data_file = world.warehouse.data_files(TABLES_BY_NAME[rel])[0]
    raw_file = next((world.home / "raw").rglob("*.jsonl"))
    ok = a_granted(role, rel)
    return {
        "direct": f"SELECT * FROM {rel}",
        "qualified": f"SELECT * FROM main.{rel}",
        "catalog_qualified": f"SELECT * FROM memory.main.{rel}",
        "temp_qualified": f"SELECT * FROM temp.main.{rel}",
        "upper_case": f"SELECT * FROM {rel.upper()}",
        "quoted_mixed_case": f'SELECT * FROM "{rel.title()}"',
        "view": f"CREATE VIEW v AS SELECT * FROM {rel}",
        "cte": f"WITH x AS (SELECT * FROM {rel}) SELECT * FROM x",
        "subquery": f"SELECT count(*) FROM (SELECT * FROM {rel}) s",
        "scalar_subquery": f"SELECT (SELECT count(*) FROM {rel}) AS n",
        "join_with_granted": f"SELECT * FROM {ok} a CROSS JOIN {rel} d",
        "read_parquet_data_file": f"SELECT * FROM read_parquet('{data_file}')",
        "read_json_raw_store": f"SELECT * FROM read_json('{raw_file}')",
        "glob_warehouse": f"SELECT * FROM glob('{world.home}/warehouse/**')",
        "attach_catalog": f"ATTACH '{world.home / 'catalog.db'}' AS c",
        "sqlite_scan_catalog": f"SELECT * FROM sqlite_scan('{world.home / 'catalog.db'}', 'iceberg_tables')",
        "copy_out": f"COPY (SELECT * FROM {rel}) TO '{world.root / 'leak.csv'}'",
        "set_external_access": "SET enable_external_access = true",
        "pragma": "PRAGMA enable_external_access",
        "set_then_read": f"SET enable_external_access = true; SELECT * FROM read_parquet('{data_file}')",
        "install_extension": "INSTALL sqlite",
        "load_extension": "LOAD httpfs",
    }


@pytest.mark.parametrize("role,rel", DENIED, ids=[f"{r}-x-{rel}" for r, rel in DENIED])
def test_every_path_to_a_denied_relation_is_refused_logged_and_silent(world, role, rel):
    gateway = Gateway(world.platform)
    principal = principal_for(role)
    for path, sql in bypasses(world, role, rel).items():
        before = len(access_log(world.ledger))
        with pytest.raises(AccessDenied) as info:
            gateway.query(role, sql)
        message = str(info.value)
        assert not any(p in message for p in PII), (path, message)
        assert str(world.home) not in message and rel not in message, (path, message)
        log = access_log(world.ledger)[before:]
        assert [(e["principal"], e["role"], e["decision"]) for e in log] == [(principal.name, role, "deny")], path
    # discovery shows only what is granted
    listed = {r["table_name"] for r in gateway.query(role, "SELECT table_name FROM information_schema.tables").to_pylist()}
    assert rel not in listed
    listed = {r["table_name"] for r in gateway.query(role, "SELECT table_name FROM duckdb_tables() UNION ALL "
                                                           "SELECT view_name FROM duckdb_views()").to_pylist()}
    assert rel not in listed


@pytest.mark.parametrize("role,rel", ALLOWED, ids=[f"{r}-reads-{rel}" for r, rel in ALLOWED])
def test_granted_relations_still_work(world, role, rel):
    result = Gateway(world.platform).query(role, f"SELECT count(*) AS n FROM {rel}")
    assert result.column("n").to_pylist()[0] > 0
    assert access_log(world.ledger)[-1]["decision"] == "allow"


@pytest.mark.parametrize("role", sorted(ROLES))
@pytest.mark.parametrize("sql,relations", [
    ("SELECT full_name FROM dim_customer", {"dim_customer"}),
    ("SELECT email FROM dim_customer", {"dim_customer"}),
    ("SELECT * FROM dim_customer WHERE email LIKE '%example%'", {"dim_customer"}),
    ("SELECT c.email FROM fact_sales f JOIN dim_customer c USING (customer_id)", {"fact_sales", "dim_customer"}),
])
def test_no_role_reaches_customer_pii(world, role, sql, relations):
    # A role granted every relation the query names is refused the PII column; any other role is refused a relation.
    if relations <= set(ROLES[role].readable):
        why = f"the query uses a column that role {role} is not granted (or that does not exist)"
    else:
        why = f"the query uses a relation or function that role {role} is not granted"
    before = len(access_log(world.ledger))
    with pytest.raises(AccessDenied) as info:
        Gateway(world.platform).query(role, sql)
    assert str(info.value) == why
    assert not any(p in str(info.value) for p in PII)
    assert [e["decision"] for e in access_log(world.ledger)[before:]] == ["deny"]


@pytest.mark.parametrize("role", ["finance_analyst", "etl_service", "incident_responder"])
def test_select_star_on_customers_holds_no_pii(world, role):
    rows = Gateway(world.platform).query(role, "SELECT * FROM dim_customer").to_pylist()
    assert rows and set(rows[0]) == {"customer_id", "region"}
    assert not any(p in json.dumps(rows) for p in PII)


def test_consumers_see_certified_versions_only(world):
    gateway = Gateway(world.platform)
    assert gateway.query("bi_reader", "SELECT sum(revenue_usd) AS r FROM mart_finance_daily_sales").column("r").to_pylist() == [820]
    governed = gateway.query("cfo@atlasmart.example", "SELECT sum(value_usd) AS v FROM metric_gross_revenue")
    assert governed.column("v").to_pylist() == [820]


def test_policy_has_separate_principals_and_no_shared_credentials():
    assert validate_policy() == []
    assert {p.kind for p in PRINCIPALS.values()} == {"human", "service"}
    for role in ROLES:
        assert any(p.role == role for p in PRINCIPALS.values()), role
    etl = ROLES["etl_service"]
    assert not set(etl.readable) & {"metric_gross_revenue", "mart_finance_daily_sales", "mart_executive_revenue"}


def test_only_incident_responders_may_withdraw_certification(tmp_path):
    from atlasmart_dagster.ops.response.incidents.detection import consumer_report
    from atlasmart_dagster.ops.response.incidents.workflow import IncidentWorkflow

    world = _loaded(tmp_path)  # its own: withdrawing would change what the shared world serves

    incident = consumer_report(world.platform, "cfo@atlasmart.example", "figures look odd", None, "2026-09-18")
    wf = IncidentWorkflow(world.platform, world.defs, world.instance)
    for who in ("ana.finance@atlasmart.example", "bi-dashboards", "somebody"):
        with pytest.raises(AccessDenied):
            wf.contain(incident, who, partitions=["2026-09-18"])
    assert world.ledger.partitions.served("mart_finance_daily_sales", "2026-09-18") is not None
    wf.contain(incident, "oncall@atlasmart.example", partitions=["2026-09-18"])
    assert world.ledger.partitions.served("mart_finance_daily_sales", "2026-09-18") is None
    decisions = [(e["principal"], e["decision"]) for e in access_log(world.ledger)[-3:]]
    # "somebody" is no principal: nothing to attribute, so nothing logged; the rest is
    assert decisions == [("ana.finance@atlasmart.example", "deny"), ("bi-dashboards", "deny"),
                         ("oncall@atlasmart.example", "allow")]
