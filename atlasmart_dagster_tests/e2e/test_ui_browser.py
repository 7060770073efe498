"""In a browser, as a user would: one day from the job page, a range backfill from the asset graph, certification state.

Starts ``dagster dev`` on a scratch AtlasMart home (the daemon included, with
``certification_sensor`` on) and drives Debian's Chromium with Playwright:

1. ``daily_sales_job``, *Materialize all…*, one partition (the current day),
   *Launch 1 run*;
2. the asset graph filtered to the chain, *Materialize all…*, a partition
   range of history days, *Launch backfill*.

Then, from the run records and the check evaluations Dagster stored: the day
ran as current work, the backfill in the backfill lane (one run for the range),
no SLO check failed a history day; and, back in the browser, the certified
mart's *Checks* tab shows each day's certification state.

Screenshots of every step go to ``$ATLASMART_TEST_ARTIFACTS`` if set, else
``<tmp_path>/screenshots``; ``05-certification-state.png`` is the README's
picture of the Checks tab. Without Chromium or Playwright the test skips,
except under ``CI=true``, where a missing browser fails it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest

from atlasmart_dagster.defs.automation.jobs import DAILY_CHAIN
from atlasmart_dagster.defs.checks.slo_checks import SLO_ASSETS, slo_check_name
from atlasmart_dagster.product.lanes import BACKFILL, CURRENT, DAGSTER_BACKFILL_TAG, lane_of
from atlasmart_dagster.product.slo import OBJECTIVES
from atlasmart_dagster.store.clock import parse_ts
from atlasmart_dagster.store.ledger.partition_states import BUILT
from atlasmart_dagster.store.tables import CERTIFIED_ASSETS
from atlasmart_dagster_tests.conftest import SAMPLE_DAYS

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking"]

# Logical time on the morning the daily load delivers 2026-09-21: that day is
# the current partition, the other sample days are history. (On the system
# clock every sample day would be history, and a one-day launch backfill work.)
LOGICAL_NOW = "2026-09-22T08:10:00Z"
CURRENT_DAY = SAMPLE_DAYS[-1]
HISTORY_DAYS = SAMPLE_DAYS[:-1]
CERTIFIED_MART = "mart_finance_daily_sales"

UI_TIMEOUT_MS = 60_000  # a page waits for GraphQL answers while two runs share the CPU
RUNS_DEADLINE_S = 180
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


def _browser_or_skip():
    """Playwright's sync API, or a skip (a failure under CI=true) saying what is missing."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium; scripts/dev test-slow does it as root)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
        missing.append('the playwright package (pip install -e ".[dev]")')
    if missing:
        reason = "the UI browser test needs " + " and ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(reason + "; under CI=true a missing browser is a failure, not a skip")
        pytest.skip(reason)
    return sync_playwright


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_json(url: str, data: bytes | None = None) -> dict:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _wait_for_ui(base: str, server: subprocess.Popen, log: Path, timeout: float = 150) -> None:
    """Until the webserver answers and the code location has loaded (the pages are empty before)."""
    query = json.dumps({"query": "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
                                 "locationOrLoadError { __typename } } } } }"}).encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.poll() is None, f"dagster dev exited ({server.returncode}):\n{log.read_text()[-3000:]}"
        try:
            _http_json(f"{base}/server_info")
            entries = _http_json(f"{base}/graphql", query)["data"]["workspaceOrError"]["locationEntries"]
        except (OSError, ValueError, KeyError, TypeError):  # not up yet, or still loading the location
            entries = []
        loaded = [e for e in entries if e["loadStatus"] == "LOADED"]
        if loaded:
            assert loaded[0]["locationOrLoadError"]["__typename"] == "RepositoryLocation", entries
            return
        time.sleep(1)
    raise AssertionError(f"the UI did not come up in {timeout}s:\n{log.read_text()[-3000:]}")


def _stop(server: subprocess.Popen) -> None:
    """Stop dagster dev and everything it started (webserver, daemon, code servers, runs): its process group."""
    group = server.pid  # started with start_new_session: the group's id is the leader's pid
    if server.poll() is None:
        os.killpg(group, signal.SIGINT)  # dagster dev shuts its children down on Ctrl-C, not on SIGTERM
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=20)
    # Whatever is left of the group, also when dagster dev itself died first (scratch home: nothing to save).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    server.wait(timeout=10)


def _check_evaluations(instance: dg.DagsterInstance, asset: str, check_name: str) -> list[dg.AssetCheckEvaluation]:
    """Every stored evaluation of one check, runless ones included (as the check's Execution history lists them)."""
    key = dg.AssetCheckKey(dg.AssetKey(asset), check_name)
    evaluations = []
    for record in instance.event_log_storage.get_asset_check_execution_history(key, limit=1000):
        data = record.event.dagster_event.event_specific_data if record.event and record.event.dagster_event else None
        if isinstance(data, dg.AssetCheckEvaluation):
            evaluations.append(data)
    return evaluations


def _day_of(evaluation: dg.AssetCheckEvaluation) -> str | None:
    """The day an evaluation is about: Dagster's partition in a run, the metadata when runless."""
    if evaluation.partition:
        return evaluation.partition
    day = evaluation.metadata.get("partition")
    return day.value if day is not None else None


def test_ui_one_day_from_the_job_page_and_a_range_backfill_from_the_asset_graph(env, tmp_path):
    sync_playwright = _browser_or_skip()
    from playwright.sync_api import expect

    shots = Path(os.environ.get("ATLASMART_TEST_ARTIFACTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {shots}")

    shell = {**os.environ, "ATLASMART_HOME": str(env.home), "ATLASMART_LANDING": str(env.landing),
             "ATLASMART_CLOCK": "logical", "PYTHONUNBUFFERED": "1"}
    shell.pop("DAGSTER_HOME", None)

    def cli(*args):
        out = subprocess.run([str(a) for a in args], env=shell, capture_output=True, text=True, timeout=300, cwd=REPO,
                             check=False)
        assert out.returncode == 0, (args, out.stdout[-2000:], out.stderr[-3000:])
        return out.stdout

    # The clock first: every other command on this home reads logical time.
    cli(BIN / "atlasmart", "--clock", "system", "clock", "set", LOGICAL_NOW)
    dagster_home = Path(cli(BIN / "atlasmart", "dagster-home").strip())
    shell["DAGSTER_HOME"] = str(dagster_home)
    # What an operator turns on in Automation; without it nothing certifies.
    cli(BIN / "dagster", "sensor", "start", "certification_sensor", "-w", REPO / "workspace.yaml")

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "dagster-dev.log"
    with open(log, "w") as log_file:
        server = subprocess.Popen(
            [BIN / "dagster", "dev", "-w", REPO / "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            env=shell, cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so _stop reaches every process it starts
        )
    try:
        _wait_for_ui(base, server, log)
        # A fresh instance greets its first visitor with a newsletter dialog that can open on top of (or under)
        # the launch dialog at any moment; record it as dismissed, as its Skip button does.
        assert _http_json(f"{base}/graphql", json.dumps({"query": "mutation { setNuxSeen }"}).encode())["data"]["setNuxSeen"]
        instance = dg.DagsterInstance.from_config(str(dagster_home))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.set_default_timeout(UI_TIMEOUT_MS)
            expect.set_options(timeout=UI_TIMEOUT_MS)
            step = 0

            def shot(name: str) -> None:
                nonlocal step
                step += 1
                page.screenshot(path=str(shots / f"{step:02d}-{name}.png"))

            try:
                run_prefix = _launch_one_day_from_the_job_page(page, base, shot)
                backfill_id = _launch_range_backfill_from_the_asset_graph(page, base, shot)
                single, backfill_runs = _wait_until_done_and_certified(instance, env, run_prefix, backfill_id, log)
                _certification_state_on_the_checks_tab(page, base, shot)
                page.goto(f"{base}/runs")
                expect(page.get_by_text(single.run_id[:8]).first).to_be_visible()
                shot("runs")
            except Exception:
                with contextlib.suppress(Exception):  # the page as it was; never hide the failure itself
                    page.screenshot(path=str(shots / "failure.png"))
                raise
            finally:
                browser.close()
    finally:
        _stop(server)

    # The one-day launch is current work: no backfill, and lanes.py (at the home's time) says current.
    now = parse_ts(LOGICAL_NOW)
    assert single.status == dg.DagsterRunStatus.SUCCESS
    assert single.tags["dagster/partition"] == CURRENT_DAY and DAGSTER_BACKFILL_TAG not in single.tags
    assert lane_of(single.tags, now) == CURRENT
    assert {e.lane for e in env.ledger.partitions.events(run_id=single.run_id, states=(BUILT,))} == {CURRENT}

    # The backfill: one run for the whole range (single-run policy), backfill lane whatever the time.
    assert [r.status for r in backfill_runs] == [dg.DagsterRunStatus.SUCCESS]
    run = backfill_runs[0]
    assert run.tags[DAGSTER_BACKFILL_TAG] == backfill_id and lane_of(run.tags) == BACKFILL
    assert (run.tags["dagster/asset_partition_range_start"], run.tags["dagster/asset_partition_range_end"]) == (
        HISTORY_DAYS[0], HISTORY_DAYS[-1])
    assert {e.lane for e in env.ledger.partitions.events(run_id=run.run_id, states=(BUILT,))} == {BACKFILL}

    # History days are not SLO events: evaluated (in the backfill run), never failed.
    slo = [(asset, objective, e) for asset in SLO_ASSETS for objective in OBJECTIVES
           for e in _check_evaluations(instance, asset, slo_check_name(objective))]
    failed = [(a, o, _day_of(e), e.description) for a, o, e in slo if not e.passed and _day_of(e) in HISTORY_DAYS]
    assert not failed, failed
    assert {_day_of(e) for _, _, e in slo} >= set(HISTORY_DAYS)


def _launch_one_day_from_the_job_page(page, base: str, shot) -> str:
    """``daily_sales_job`` -> *Materialize all…* -> the current day -> *Launch 1 run*; the run id's prefix."""
    from playwright.sync_api import expect

    page.goto(f"{base}/locations/atlasmart_dagster/jobs/daily_sales_job")
    page.get_by_role("button", name="Materialize all").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_text(f"Launch runs to materialize {len(DAILY_CHAIN)} assets")).to_be_visible()
    _pick_partitions(page, dialog, CURRENT_DAY, "1 partition")
    shot("job-page-one-partition")
    dialog.get_by_role("button", name="Launch 1 run").click()
    toast = page.get_by_text(re.compile(r"Launched run [0-9a-f]{8}"))
    expect(toast).to_be_visible()
    shot("run-launched")
    return re.search(r"Launched run ([0-9a-f]{8})", toast.inner_text()).group(1)


def _launch_range_backfill_from_the_asset_graph(page, base: str, shot) -> str:
    """Asset graph filtered to the chain -> *Materialize all…* -> a range of history days -> *Launch backfill*."""
    from playwright.sync_api import expect

    page.goto(f"{base}/asset-groups")
    # The filter is a CodeMirror editor: no role, and its placeholder text is not the element that takes clicks.
    page.locator(".CodeMirror").filter(has_text="Search and filter assets").click()
    page.keyboard.type(" or ".join(f'key:"{asset}"' for asset in DAILY_CHAIN))
    page.keyboard.press("Enter")
    page.get_by_role("button", name="Materialize all").click()
    dialog = page.get_by_role("dialog")
    # The dialog names how many assets the selection holds: the chain, nothing more.
    expect(dialog.get_by_text(f"Launch runs to materialize {len(DAILY_CHAIN)} assets")).to_be_visible()
    _pick_partitions(page, dialog, f"[{HISTORY_DAYS[0]}...{HISTORY_DAYS[-1]}]", f"{len(HISTORY_DAYS)} partitions")
    shot("asset-graph-range-backfill")
    dialog.get_by_role("button", name="Launch backfill").click()
    toast = page.get_by_text(re.compile(r"Created backfill [a-z0-9]+"))
    expect(toast).to_be_visible()
    shot("backfill-created")
    return re.search(r"Created backfill ([a-z0-9]+)", toast.inner_text()).group(1)


def _pick_partitions(page, dialog, text: str, expected_count: str) -> None:
    """Type a partition (or ``[start...end]``) into the launch dialog; wait until it counts them."""
    from playwright.sync_api import expect

    # The picker shows the last 90 days by default; the sample days fall out of that window in time.
    dialog.get_by_role("button", name="Last 90 days").click()
    page.get_by_role("menuitem", name="All time").click()
    box = dialog.get_by_role("textbox").first
    box.fill(text)
    box.press("Enter")
    expect(dialog.get_by_text(expected_count, exact=True)).to_be_visible()


def _wait_until_done_and_certified(instance, env, run_prefix: str, backfill_id: str, log: Path):
    """Until both launches finished, certification_sensor certified every day and its golden-check runs ended."""
    deadline = time.monotonic() + RUNS_DEADLINE_S
    while True:
        runs = instance.get_runs()
        single = [r for r in runs if r.run_id.startswith(run_prefix)]
        backfill_runs = [r for r in runs if r.tags.get(DAGSTER_BACKFILL_TAG) == backfill_id]
        golden = [r for r in runs if r.job_name == "dashboard_checks_job"]
        certified = all(env.ledger.partitions.served(asset, day) for asset in CERTIFIED_ASSETS for day in SAMPLE_DAYS)
        # One golden-check run per certifying run (the day's and the backfill's), requested after certification.
        if (single and backfill_runs and certified and len(golden) >= 2
                and all(r.status in FINISHED for r in runs)):
            return single[0], backfill_runs
        failed = [r for r in single + backfill_runs if r.status == dg.DagsterRunStatus.FAILURE]
        if failed:
            raise AssertionError(f"run {failed[0].run_id} failed:\n{_errors_of(instance, failed[0].run_id)}")
        if time.monotonic() > deadline:
            state = [(r.run_id[:8], r.job_name, r.status.value) for r in runs]
            raise AssertionError(f"not done in {RUNS_DEADLINE_S}s: runs {state}, certified {certified}\n"
                                 f"{log.read_text()[-4000:]}")
        time.sleep(2)


def _errors_of(instance: dg.DagsterInstance, run_id: str) -> str:
    """The errors a run's event log holds (dagster dev's own log does not repeat them)."""
    errors = []
    for entry in instance.all_logs(run_id):
        error = getattr(entry.dagster_event.event_specific_data, "error", None) if entry.dagster_event else None
        if error is not None:
            errors.append(f"{entry.dagster_event.event_type_value}: {error.to_string()[-2000:]}")
    return "\n".join(errors) or "no error in the run's event log"


def _certification_state_on_the_checks_tab(page, base: str, shot) -> None:
    """The certified mart's Checks tab, ``certification_state``, Execution history: every day CERTIFIED v1."""
    from playwright.sync_api import expect

    page.goto(f"{base}/assets/{CERTIFIED_MART}")
    page.get_by_role("tab", name="Checks").click()
    page.get_by_text("certification_state", exact=True).first.click()
    expect(page.get_by_text("Latest execution")).to_be_visible()
    page.get_by_role("tab", name="Execution history").click()
    for day in SAMPLE_DAYS:
        expect(page.get_by_text(f"{day} CERTIFIED v1").first).to_be_visible()
    shot("certification-state")
