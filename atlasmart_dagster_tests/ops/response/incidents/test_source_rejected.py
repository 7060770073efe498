"""A refused delivery opens an incident titled by its mechanism, from any launch path (issue 33 items 6, 7).

A manifest claiming one row more than its file holds is not a late source: the delivery is there and
wrong. Detection says so at once ("Source rejected"), for a new day and for a lying re-send of a day already
served (which stays served), while a day with nothing delivered is still "Source late" after its grace.
A consumer report about a day with an open incident joins it.
"""

import shutil

from atlasmart_dagster.ops.response.incidents.detection import consumer_report, detect
from atlasmart_dagster.store.ledger.incidents import IncidentStore
from atlasmart_dagster.ops.response.incidents.notices import INCOMPLETE, ITEMS
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAY = "2026-09-19"


def _incidents(env):
    return IncidentStore(env.platform.ledger).open_incidents()


def _lie_about_rows(env, day: str, batch_id: str) -> None:
    rows = read_rows(env.day_dir(day))
    write_batch(env.day_dir(day), rows, batch_id=batch_id, expected_rows=len(rows) + 1)


def test_a_lying_manifest_of_a_new_day_opens_a_source_rejected_incident_at_once(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-20T08:04:00Z")  # ready, within the 10 min lateness grace
    _lie_about_rows(env, DAY, "ERP-20260919-LIE")
    assert not run_chain(env.defs, env.instance, env.platform, [DAY], lane="current").success

    (incident_id,) = detect(env.platform, env.instance)
    (incident,) = _incidents(env)
    assert incident.id == incident_id
    assert incident.title.startswith(f"Source rejected: the delivery of {DAY} was refused: expected_rows is ")
    assert "late" not in incident.title.lower()
    (signal,) = incident.signals
    assert signal["kind"] == "source_rejected"
    assert ITEMS[signal["kind"]](signal)["impact"] == INCOMPLETE  # 2 of 3 lines: incomplete, in consumer words

    # the same refusal again (a retry, a re-launch from the UI) adds nothing
    assert not run_chain(env.defs, env.instance, env.platform, [DAY], lane="current").success
    assert detect(env.platform, env.instance) == []

    # a consumer report about the day joins its incident
    assert consumer_report(env.platform, "finance-analyst@atlasmart.example", "no figures for the 19th?", None,
                           DAY) == incident_id
    assert consumer_report(env.platform, "finance-analyst@atlasmart.example", "the mart is empty for the 19th",
                           "mart_finance_daily_sales", DAY) == incident_id
    assert [i.id for i in _incidents(env)] == [incident_id]


def test_a_lying_resend_of_a_served_day_opens_an_incident_and_the_day_stays_served(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T07:00:00Z")
    assert run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill").success
    assert detect(env.platform, env.instance) == []
    _lie_about_rows(env, DAY, "ERP-20260919-02")
    assert not run_chain(env.defs, env.instance, env.platform, [DAY], lane="manual").success

    (incident_id,) = detect(env.platform, env.instance)
    (incident,) = _incidents(env)
    assert incident.id == incident_id and incident.title.startswith(f"Source rejected: the delivery of {DAY} was refused")
    assert partition_status(env.platform, DAY).state == "CERTIFIED"  # v1 still served


def test_a_day_with_nothing_delivered_is_still_source_late(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-20T08:15:00Z")  # past the 08:00 schedule and its grace
    shutil.rmtree(env.day_dir(DAY))
    assert not run_chain(env.defs, env.instance, env.platform, [DAY], lane="current").success
    detect(env.platform, env.instance)
    (incident,) = _incidents(env)
    assert incident.title.startswith(f"Source late: {DAY}") and incident.signals[0]["kind"] == "source_late"
