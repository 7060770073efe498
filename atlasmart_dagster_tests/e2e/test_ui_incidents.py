"""In a browser: an open incident is on the pages of the assets it affects, and says resolved once it is.

A real fault on a scratch home at logical time 2026-09-22 08:20 UTC: the
history days are certified, the ERP renamed ``line_amount_usd`` in
2026-09-21's delivery, the contract gate (a blocking check) stopped the day,
and a tick of ``incident_sensor`` opened INC-0001 and showed it to the
instance. ``dagster-webserver`` (no daemon: the test ticks the sensor itself)
serves the project's code location (``atlasmart_dagster.definitions``, which
has the ``open_incidents`` check), and Debian's Chromium reads, as a user would:

* the origin's day (``raw_order_lines``, *Partitions*, 2026-09-21): the
  incident id and status in the day's metadata, above the materialization's;
* the served asset consumers look at (``served_mart_finance_daily_sales``):
  its ``open_incidents`` check failing with the incident, and its *Events*
  tab with the day's observation;

then the incident is repaired, verified and resolved, the sensor ticks, and
the same pages say resolved and the check passes. Screenshots go to
``$ATLASMART_TEST_ARTIFACTS`` if set, else ``<tmp_path>/screenshots``.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time

import pytest

from atlasmart_dagster.defs.assets.served import served_asset
from atlasmart_dagster.ops.response.incidents.workflow import IncidentWorkflow
from atlasmart_dagster.ops.runs.chains import run_chain, run_reference
from atlasmart_dagster.product.contract_approvals import approve
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster.store.instance.dagster_instance import dagster_instance
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.e2e.test_ui_browser import (
    BIN,
    CHROMIUM,
    CHROMIUM_ARGS,
    REPO,
    UI_TIMEOUT_MS,
    Shell,
    _browser_or_skip,
    _free_port,
    _http_json,
    _screenshots,
    _stop,
    _wait_for_ui,
)

from atlasmart_dagster_tests.ops.response.incidents.faulted_days import stop_day_by_contract_drift, tick

pytestmark = pytest.mark.slow

DAY = SAMPLE_DAYS[-1]
ONCALL = "oncall@atlasmart.example"
ORIGIN = "raw_order_lines"
SERVED = served_asset("mart_finance_daily_sales")
LOCATION = "atlasmart_dagster.definitions"


@pytest.fixture
def opened(tmp_path, monkeypatch):
    """History certified, 2026-09-21 stopped by the contract gate, INC-0001 opened and shown by a sensor tick."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own instance, as `atlasmart dagster-home` says
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T08:20:00Z")
    env.instance = dagster_instance(env.platform.home)
    assert run_reference(env.defs, env.instance)
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS[:-1], lane="backfill").success
    env.batch_id = stop_day_by_contract_drift(env, DAY)
    env.cursor = None
    assert tick(env).skip_message.startswith("incidents opened or updated: INC-0001")
    return env


def resolve(env) -> None:
    """The owner approves the new layout; repair, verification and resolution; then the sensor ticks."""
    wf = IncidentWorkflow(env.platform, env.defs, env.instance)
    wf.contain("INC-0001", ONCALL)
    approve(env.ledger, env.batch_id, DAY, "v2", "erp-operations", "erp data owner", "renamed field, same meaning",
            env.platform.clock.now(), incident_id="INC-0001")
    assert wf.repair("INC-0001", ONCALL, DAY, DAY, "replay the preserved batch", include_current=True).success
    assert wf.verify("INC-0001", ONCALL)["passed"]
    wf.resolve("INC-0001", ONCALL, "replayed with the approved layout")
    tick(env)


def test_the_incident_is_on_the_pages_of_the_assets_it_affects_until_resolved(opened, tmp_path):
    sync_playwright = _browser_or_skip()
    from playwright.sync_api import expect

    shots = _screenshots(tmp_path)
    sh = Shell(opened, tmp_path)
    sh.vars["DAGSTER_HOME"] = str(opened.platform.home.dagster_home)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "dagster-webserver.log"
    with open(log, "w") as log_file:
        server = subprocess.Popen(
            [BIN / "dagster-webserver", "-m", LOCATION, "-h", "127.0.0.1", "-p", str(port)],
            env=sh.vars, cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        _wait_for_ui(base, server, log)
        seen = _http_json(f"{base}/graphql", json.dumps({"query": "mutation { setNuxSeen }"}).encode())
        assert seen["data"]["setNuxSeen"]  # no welcome dialog over the pages
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.set_default_timeout(UI_TIMEOUT_MS)
            expect.set_options(timeout=UI_TIMEOUT_MS)

            def shot(name: str) -> None:
                page.screenshot(path=str(shots / f"incident-{name}.png"), full_page=True)

            try:
                day = _day_metadata_on_page(page, base, ORIGIN, DAY, "open")
                shot("origin-day-open")
                assert day["incident"] == "INC-0001" and day["incident_status"] == "open"
                assert day["open_incidents"] == "INC-0001"
                check = _open_incidents_check_on_page(page, base, SERVED)
                shot("served-check-open")
                assert check["result"] == "Failed" and check["open_incidents"] == "INC-0001"
                assert f"INC-0001 open ({DAY})" in check["latest"]
                event = _newest_event_on_page(page, base, SERVED)
                shot("served-events-open")
                assert event["partition"] == DAY and event["incident"] == "INC-0001"
                assert event["description"].startswith("INC-0001 open: Check failed: raw_order_lines")

                resolve(opened)
                day = _day_metadata_on_page(page, base, ORIGIN, DAY, "resolved")
                shot("origin-day-resolved")
                assert (day["incident"], day["open_incidents"]) == ("INC-0001", "none")
                check = _open_incidents_check_on_page(page, base, SERVED)
                shot("served-check-resolved")
                assert check["result"] == "Passed" and check["open_incidents"] == "none"
                event = _newest_event_on_page(page, base, SERVED)
                shot("served-events-resolved")
                assert event["incident_status"] == "resolved"
                assert event["description"].startswith("INC-0001 resolved")
            except Exception:
                with contextlib.suppress(Exception):  # the page as it was; never hide the failure itself
                    page.screenshot(path=str(shots / "incident-failure.png"))
                raise
            finally:
                browser.close()
    finally:
        _stop(server)


def _cell(page, label: str) -> str:
    """The value beside ``label`` in the metadata table the page shows first (label, value, description)."""
    row = page.locator("tr").filter(has=page.get_by_text(label, exact=True)).first
    return row.locator("td").nth(1).inner_text().strip()


def _day_metadata_on_page(page, base: str, asset: str, day: str, status: str) -> dict[str, str]:
    """The incident rows of the day's metadata on the asset's Partitions tab, once they say ``status``."""
    from playwright.sync_api import expect

    page.goto(f"{base}/assets/{asset}?view=partitions&partition={day}")
    row = page.locator("tr").filter(has=page.get_by_text("incident_status", exact=True)).first
    expect(row).to_contain_text(status)
    return {label: _cell(page, label) for label in ("incident", "incident_status", "open_incidents")}


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0].strip() if start in text else ""


def _read_when(page, read, ready, what: str):
    """``read(body text)`` once ``ready`` holds of it: Markdown renders after the rest of the panel."""
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while True:
        found = read(page.locator("body").inner_text())
        if ready(found):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not on the page in {UI_TIMEOUT_MS / 1000:.0f}s; read {found}")
        time.sleep(0.5)


def _open_incidents_check_on_page(page, base: str, asset: str) -> dict[str, str]:
    """The ``open_incidents`` check on the asset's Checks tab: its latest result, description and metadata."""
    page.goto(f"{base}/assets/{asset}?view=checks&checkDetail=open_incidents")

    def read(text: str) -> dict[str, str]:
        latest = text.split("Latest execution", 1)[1] if "Latest execution" in text else ""
        return {"result": _between(latest, "Evaluation result", "Timestamp"),
                "latest": latest.split("Evaluation result", 1)[0].strip()}

    found = _read_when(page, read, lambda f: f["result"] and f["latest"], f"{asset}'s open_incidents check")
    return found | {"open_incidents": _cell(page, "open_incidents")}


def _newest_event_on_page(page, base: str, asset: str) -> dict[str, str]:
    """The event the asset's Events tab shows first (the newest): its day, description and incident metadata."""
    page.goto(f"{base}/assets/{asset}?view=events")

    def read(text: str) -> dict[str, str]:
        partition = re.search(r"Partition (\S+) observed", text)
        return {"partition": partition.group(1) if partition else "",
                "description": _between(text, "Description", "Metadata")}

    found = _read_when(page, read, lambda f: f["partition"] and f["description"], f"{asset}'s newest event")
    return found | {"incident": _cell(page, "incident"), "incident_status": _cell(page, "incident_status")}
