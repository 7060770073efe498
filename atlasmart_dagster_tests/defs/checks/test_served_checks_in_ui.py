"""What the UI shows of a served asset, read through the GraphQL its pages query (``dagster_graphql``, in process).

A served day's page (*Partitions*, ``AssetPartitionDetail``) names in its
header the run and job of the day's newest materialization, and the *Checks*
tab shows each check's ``executionForLatestMaterialization`` (None reads *Not
Evaluated*). Issue 33: a served day recorded runless read "Run None"; recorded
in its build run, the runless checks matched nothing and read *Not Evaluated*.
"""

import dagster as dg
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster_graphql.test.utils import execute_dagster_graphql

from atlasmart_dagster.defs.assets.served import SERVED_ASSETS, served_asset
from atlasmart_dagster.defs.checks.certification_checks import CERTIFICATION_STATE
from atlasmart_dagster.defs.checks.open_incidents import OPEN_INCIDENTS
from atlasmart_dagster.defs.checks.slo_checks import SLO_CHECK_KEYS
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.slo import latest_results
from atlasmart_dagster_tests.environment import Env

MART = "mart_finance_daily_sales"

# The code location the in-process workspace loads: the test's own definitions (set before loading).
defs: dg.Definitions | None = None

DAY_PAGE = """
query ($assetKey: AssetKeyInput!, $partitionKey: String!) {
  assetOrError(assetKey: $assetKey) {
    ... on Asset {
      assetEventHistory(partitions: [$partitionKey], limit: 1, eventTypeSelectors: [MATERIALIZATION]) {
        results { ... on MaterializationEvent { runId runOrError { __typename ... on Run { id pipelineName } } } }
      }
    }
  }
}
"""

CHECKS_TAB = """
query ($assetKey: AssetKeyInput!) {
  assetNodeOrError(assetKey: $assetKey) {
    ... on AssetNode {
      assetChecksOrError {
        ... on AssetChecks { checks { name executionForLatestMaterialization { status evaluation { description } } } }
      }
    }
  }
}
"""


def ui_context(env: Env) -> WorkspaceProcessContext:
    global defs
    defs = env.defs
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name=__name__, attribute="defs"), location_name="atlasmart_dagster")
    return WorkspaceProcessContext(env.instance, InProcessWorkspaceLoadTarget(origin))


def query(process: WorkspaceProcessContext, text: str, **variables) -> dict:
    result = execute_dagster_graphql(process.create_request_context(), text, variables)
    assert not result.errors, result.errors
    return result.data


def day_header(process, asset: str, day: str) -> tuple[str, str | None]:
    """The day page's header: the newest materialization's run id and its job (None: "Run None", "Job None")."""
    data = query(process, DAY_PAGE, assetKey={"path": [asset]}, partitionKey=day)
    (newest,) = data["assetOrError"]["assetEventHistory"]["results"]
    run = newest["runOrError"]
    return newest["runId"], run["pipelineName"] if run["__typename"] == "Run" else None


def checks_tab(process, asset: str) -> dict[str, dict | None]:
    """Each check's execution the Checks tab shows as current (None: *Not Evaluated*)."""
    data = query(process, CHECKS_TAB, assetKey={"path": [asset]})
    checks = data["assetNodeOrError"]["assetChecksOrError"]["checks"]
    return {c["name"]: c["executionForLatestMaterialization"] for c in checks}


def test_a_served_days_header_names_its_build_run_and_every_served_check_still_reads_its_state(tmp_path):
    env = Env(tmp_path)
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:  # SQLite, as the UI's instance
        env.instance = instance
        shown_in_the_ui(env)


def shown_in_the_ui(env: Env) -> None:
    first = run_chain(env.defs, env.instance, env.platform, ["2026-09-19"], lane="backfill")
    second = run_chain(env.defs, env.instance, env.platform, ["2026-09-20"], lane="backfill")  # a newer served day
    assert first.certified == ["2026-09-19"] and second.certified == ["2026-09-20"]
    slo_names = {k.name for k in SLO_CHECK_KEYS if k.asset_key == dg.AssetKey(served_asset(MART))}
    assert slo_names  # the marts' served assets carry the slo_* checks
    with ui_context(env) as process:
        for asset in SERVED_ASSETS:
            for outcome, day in ((first, "2026-09-19"), (second, "2026-09-20")):
                assert day_header(process, asset, day) == (outcome.run_id, "backfill_sales_job"), (asset, day)
            shown = checks_tab(process, asset)
            expected = {CERTIFICATION_STATE, OPEN_INCIDENTS} | (slo_names if asset == served_asset(MART) else set())
            assert expected <= set(shown), (asset, shown)
            not_evaluated = sorted(name for name in expected if shown[name] is None)
            assert not not_evaluated, (asset, "Not Evaluated", not_evaluated)
            assert shown[OPEN_INCIDENTS]["status"] == "SUCCEEDED"
            assert shown[CERTIFICATION_STATE]["status"] in {"SUCCEEDED", "FAILED"}
            assert shown[CERTIFICATION_STATE]["evaluation"]["description"].startswith("**")


# What a check's *Partitions* tab asks (the UI's ``AssetCheckPartitionHealthQuery``): Dagster counts a day
# only when its newest evaluation names the day's newest materialization (``AssetCheckPartitionInfo.is_current``).
CHECK_PARTITIONS_TAB = """
query ($assetKey: AssetKeyInput!, $checkName: String!) {
  assetNodeOrError(assetKey: $assetKey) {
    ... on AssetNode {
      assetCheckOrError(checkName: $checkName) {
        ... on AssetCheck {
          partitionStatuses { ... on AssetCheckTimePartitionStatuses { ranges { startKey endKey status } } }
        }
      }
    }
  }
}
"""


def check_partitions_tab(process, asset: str, check: str) -> dict[str, str]:
    """Each day the check's Partitions tab counts, with its status (a day absent reads *Missing*)."""
    from atlasmart_dagster.defs.partitions import daily_partitions

    data = query(process, CHECK_PARTITIONS_TAB, assetKey={"path": [asset]}, checkName=check)
    days = {}
    for r in data["assetNodeOrError"]["assetCheckOrError"]["partitionStatuses"]["ranges"]:
        keys = daily_partitions.get_partition_keys_in_range(dg.PartitionKeyRange(r["startKey"], r["endKey"]))
        days.update(dict.fromkeys(keys, r["status"]))
    return days


def test_a_checks_partitions_tab_counts_every_day_it_evaluated(tmp_path):
    """Issue 33: every day read *Missing* ("Passed (0)") though each was evaluated, because no evaluation named
    the materialization it judged."""
    env = Env(tmp_path)
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        env.instance = instance
        run_chain(env.defs, env.instance, env.platform, ["2026-09-19", "2026-09-20"], lane="backfill")
        run_chain(env.defs, env.instance, env.platform, ["2026-09-21"], lane="current")
        with ui_context(env) as process:
            chain = check_partitions_tab(process, MART, "mart_matches_agg_and_metric")
            assert chain == dict.fromkeys(["2026-09-19", "2026-09-20", "2026-09-21"], "SUCCEEDED"), chain
            # An SLO check counts each served day measured on its objective (the daily load's first delivery):
            # met or missed as recorded; a day not measured (backfilled) is not an SLO event and reads Missing.
            for key in SLO_CHECK_KEYS:
                recorded = {r.partition: "SUCCEEDED" if r.met else "FAILED"
                            for day in ("2026-09-19", "2026-09-20", "2026-09-21")
                            for r in latest_results(env.platform.ledger, day) if f"slo_{r.objective}" == key.name}
                assert recorded.keys() == {"2026-09-21"}, (key, recorded)
                shown = check_partitions_tab(process, key.asset_key.to_user_string(), key.name)
                assert shown == recorded, (key, shown, recorded)
