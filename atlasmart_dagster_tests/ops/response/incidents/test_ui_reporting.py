"""An incident in the Dagster UI: observed on each asset and day it affects, and on the served assets' check.

A real fault opens it: the ERP renamed ``line_amount_usd``, the contract gate
(a blocking check) stopped 2026-09-21, and ``incident_sensor`` found the
failed check. The incident then goes through containment, triage, a notice,
repair, verification and resolution, with the sensor ticking after each step.
"""

import dagster as dg
import pytest

from atlasmart_dagster.defs.assets.served import SERVED_ASSETS, served_asset
from atlasmart_dagster.defs.checks.open_incidents import OPEN_INCIDENTS
from atlasmart_dagster.definitions import open_incidents_checks
from atlasmart_dagster.ops.response.incidents.ui_reporting import (
    INCIDENT,
    INCIDENT_STATUS,
    show_incidents_in_ui,
)
from atlasmart_dagster.ops.response.incidents.workflow import IncidentWorkflow
from atlasmart_dagster.product.contract_approvals import approve
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster.store.tables import CERTIFIED_ASSETS, DAILY_CHAIN
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.ops.response.incidents.faulted_days import stop_day_by_contract_drift, tick

DAY = "2026-09-21"
ONCALL = "oncall@atlasmart.example"
ORIGIN = "raw_order_lines"
PRODUCTS = [*CERTIFIED_ASSETS, *(served_asset(p) for p in CERTIFIED_ASSETS)]


@pytest.fixture
def drifted(tmp_path):
    """2026-09-21 stopped by the contract gate: a failed blocking check, no incident yet."""
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T08:20:00Z")
    env.batch_id = stop_day_by_contract_drift(env, DAY)
    env.cursor = None
    env.workflow = IncidentWorkflow(env.platform, env.defs, env.instance)
    return env


def written(env) -> int:
    """The newest event id of the instance's event log: unchanged when nothing was written."""
    return env.instance.event_log_storage.get_maximum_record_id() or 0


def latest(env, asset: str, day: str | None = DAY) -> dg.AssetObservation | None:
    """The newest observation of ``asset`` for ``day``, as the UI's Events tab lists it first."""
    result = env.instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[day] if day else None), limit=1)
    return result.records[0].asset_observation if result.records else None


def shown(env, asset: str, day: str | None = DAY) -> tuple[str, str] | None:
    """(incident id, status) of the newest observation of ``asset`` for ``day``."""
    observation = latest(env, asset, day)
    if observation is None:
        return None
    return observation.metadata[INCIDENT].value, observation.metadata[INCIDENT_STATUS].value


def open_check(env, served: str) -> dg.AssetCheckEvaluation | None:
    record = env.instance.get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey(served), OPEN_INCIDENTS))
    return record.event.dagster_event.asset_check_evaluation_data if record and record.event else None


def test_the_sensor_shows_the_incident_it_opens_on_the_origin_the_products_and_the_served_assets(drifted):
    assert tick(drifted).skip_message.startswith("incidents opened or updated: INC-0001")
    for asset in [ORIGIN, *PRODUCTS]:
        assert shown(drifted, asset) == ("INC-0001", "open"), asset
    observation = latest(drifted, served_asset("mart_finance_daily_sales"))
    assert observation.partition == DAY
    assert observation.metadata["triage_verdict"].value == "not triaged yet"
    assert observation.metadata["open_incidents"].value == "INC-0001"
    assert observation.metadata["served_version"].value == f"Finance daily sales: nothing served for {DAY}"
    assert observation.metadata["served_now"].value.startswith(f"{DAY}: not due yet")
    assert observation.description.startswith("**INC-0001 open**: Check failed: raw_order_lines:source_contract")
    for served in SERVED_ASSETS:
        evaluation = open_check(drifted, served)
        assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
        assert evaluation.metadata[OPEN_INCIDENTS].value == "INC-0001"
        assert f"**INC-0001 open** ({DAY})" in evaluation.description

    before = written(drifted)
    assert tick(drifted).skip_message == "no new evidence of trouble"
    assert written(drifted) == before  # nothing new: nothing written


def test_each_step_of_the_workflow_is_shown_and_resolution_leaves_nothing_open(drifted):
    tick(drifted)
    wf = drifted.workflow
    wf.contain("INC-0001", ONCALL)
    tick(drifted)
    assert shown(drifted, "mart_finance_daily_sales") == ("INC-0001", "contained")
    radius = wf.identify("INC-0001", ONCALL, origin_field="line_amount_usd")["blast_radius"]
    tick(drifted)
    for asset in (a.asset for a in radius.affected):
        day = DAY if asset in DAILY_CHAIN or asset in SERVED_ASSETS else None
        assert shown(drifted, asset, day) == ("INC-0001", "identified"), asset
    assert latest(drifted, "dashboard_finance_daily_sales", None).metadata["days"].value == DAY
    assert latest(drifted, "fact_sales").metadata["triage_verdict"].value == "pipeline or schema bug"
    wf.notify("INC-0001", ONCALL, stage="initial", summary="Sales of 21 September are not published yet.",
              repair="the new layout is being checked with the ERP team", next_update="at 12:00 UTC",
              restated=False)
    tick(drifted)
    notice = latest(drifted, served_asset("mart_executive_revenue")).metadata["consumer_notice"]
    assert isinstance(notice, dg.MarkdownMetadataValue)
    assert notice.value.startswith("# Data notice INC-0001 (initial)")
    assert open_check(drifted, served_asset("mart_executive_revenue")).metadata["consumer_notice"] == notice

    approve(drifted.ledger, drifted.batch_id, DAY, "v2", "erp-operations", "erp data owner",
            "renamed field, same meaning", drifted.platform.clock.now(), incident_id="INC-0001")
    assert wf.repair("INC-0001", ONCALL, DAY, DAY, "replay the preserved batch", include_current=True).success
    assert wf.verify("INC-0001", ONCALL)["passed"]
    tick(drifted)
    served = latest(drifted, served_asset("mart_finance_daily_sales"))
    assert served.metadata[INCIDENT_STATUS].value == "verifying"
    assert served.metadata["served_version"].value.startswith("Finance daily sales: version 1, certified")

    wf.resolve("INC-0001", ONCALL, "replayed with the approved layout")
    tick(drifted)
    for asset in {ORIGIN, *PRODUCTS, *(a.asset for a in radius.affected)}:
        day = DAY if asset in DAILY_CHAIN or asset in SERVED_ASSETS else None
        observation = latest(drifted, asset, day)
        assert shown(drifted, asset, day) == ("INC-0001", "resolved"), asset
        assert observation.metadata["open_incidents"].value == "none"
    for served in SERVED_ASSETS:
        evaluation = open_check(drifted, served)
        assert evaluation.passed and evaluation.metadata[OPEN_INCIDENTS].value == "none"

    before = written(drifted)
    tick(drifted)
    assert written(drifted) == before  # a resolved incident with nothing new is not looked at again


def test_a_command_that_shows_its_incident_leaves_the_sensor_nothing_to_write(drifted):
    tick(drifted)
    drifted.workflow.contain("INC-0001", ONCALL)
    by_command = show_incidents_in_ui(drifted.instance, drifted.platform, ["INC-0001"])
    assert by_command.incidents == ["INC-0001"]
    assert shown(drifted, ORIGIN) == ("INC-0001", "contained")
    before = written(drifted)
    tick(drifted)
    assert written(drifted) == before


def test_a_command_that_reports_its_days_and_shows_its_incident_writes_one_check_row(drifted):
    """``incident contain`` reports the day's state (open_incidents with it) and then shows the incident: one row."""
    tick(drifted)
    key = dg.AssetCheckKey(dg.AssetKey(served_asset("mart_finance_daily_sales")), OPEN_INCIDENTS)
    rows = lambda: len(list(drifted.instance.event_log_storage.get_asset_check_execution_history(key, limit=100)))
    before = rows()
    drifted.workflow.contain("INC-0001", ONCALL)
    show_incidents_in_ui(drifted.instance, drifted.platform, ["INC-0001"])
    tick(drifted)
    assert rows() == before + 1
    assert "**INC-0001 contained**" in open_check(drifted, served_asset("mart_finance_daily_sales")).description


def test_a_wiped_served_asset_is_shown_its_open_incident_again(drifted):
    """A withdrawal wipes a served asset whole (served.py), its observations and check history with it."""
    tick(drifted)
    served = served_asset("mart_finance_daily_sales")
    drifted.instance.wipe_assets([dg.AssetKey(served)])
    assert latest(drifted, served) is None and open_check(drifted, served) is None
    tick(drifted)
    assert shown(drifted, served) == ("INC-0001", "open")
    assert not open_check(drifted, served).passed


def test_the_check_executed_from_the_ui_says_the_same_as_the_reported_one(drifted):
    tick(drifted)
    reported = {served: open_check(drifted, served).description for served in SERVED_ASSETS}
    defs = dg.Definitions.merge(drifted.defs, dg.Definitions(asset_checks=[open_incidents_checks]))
    keys = [dg.AssetCheckKey(dg.AssetKey(served), OPEN_INCIDENTS) for served in SERVED_ASSETS]
    job = defs.resolve_implicit_global_asset_job_def().get_subset(asset_selection=set(),
                                                                   asset_check_selection=set(keys))
    result = job.execute_in_process(instance=drifted.instance)
    executed = {e.asset_key.to_user_string(): e for e in result.get_asset_check_evaluations()}
    assert set(executed) == set(SERVED_ASSETS)
    for served, evaluation in executed.items():
        assert not evaluation.passed and evaluation.description == reported[served]
        newest = drifted.instance.get_latest_asset_check_evaluation_record(
            dg.AssetCheckKey(dg.AssetKey(served), OPEN_INCIDENTS))
        assert newest.run_id == result.run_id  # the run's evaluation is the one the UI shows now
