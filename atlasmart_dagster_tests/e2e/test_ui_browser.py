"""In a browser, as a user would: what the Dagster UI shows for each day is what consumers are served.

Starts ``dagster dev`` on a scratch AtlasMart home at logical time 2026-09-22
08:10 UTC and drives Debian's Chromium with Playwright, in the README's order:

1. with ``certification_sensor`` off (an operator stopped it; it is on by
   default), two single days from the ``daily_sales_job`` page (the current
   day 2026-09-21, and 2026-09-20) and a range of older days from the asset
   graph (*Launch backfill*);
2. the sensor turned on from its page in the UI: it catches up on the runs
   that ended while it was off.

At every stage the test reads from the page, for every day, the partition
status the user sees on the served asset (``served_mart_finance_daily_sales``,
its *Partitions* tab) and compares it with ``atlasmart --json status``: a day
is green exactly when consumers are served a certified version. The stages:
built but not certified (the mart is green, the served asset is not), after
the sensor caught up, after a held restatement (still served v1), after a
withdrawal (``atlasmart incident contain``: no longer served), and after a
reload of a delivered day (``dagster asset materialize``: still served, its
``certified_at`` unchanged on the page). It also reads the *Partition* column
of a check's *Execution history* and the ``atlasmart/lane`` tag of the
UI-launched runs in *Runs*.

Screenshots of every step go to ``$ATLASMART_TEST_ARTIFACTS`` if set, else
``<tmp_path>/screenshots``; ``served-state.png`` is the README's picture.
Without Chromium or Playwright the test skips, except under ``CI=true``, where
a missing browser fails it.
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

from atlasmart_dagster.defs.assets.served import served_asset
from atlasmart_dagster.store.tables import DAILY_CHAIN
from atlasmart_dagster.product.lanes import DAGSTER_BACKFILL_TAG
from atlasmart_dagster_tests.environment import SAMPLE_DAYS
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking"]

# Logical time on the morning the daily load delivers 2026-09-21: that day is
# the current partition, the other sample days are history.
LOGICAL_NOW = "2026-09-22T08:10:00Z"
CURRENT_DAY = SAMPLE_DAYS[-1]
JOB_PAGE_DAYS = [SAMPLE_DAYS[-1], SAMPLE_DAYS[-2]]  # each launched alone from the job page
RANGE_DAYS = SAMPLE_DAYS[:-2]  # one backfill from the asset graph
MART = "mart_finance_daily_sales"
SERVED = served_asset(MART)
RESTATED_DAY, WITHDRAWN_DAY = "2026-09-19", "2026-09-20"

UI_TIMEOUT_MS = 60_000  # a page waits for GraphQL answers while runs share the CPU
DEADLINE_S = 240
ENDED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
# The colour of the status dot beside each partition key in an asset's Partitions tab.
DOT_STATES = {"green": "MATERIALIZED", "gray": "MISSING", "red": "FAILED", "blue": "MATERIALIZING"}


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
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    server.wait(timeout=10)


class Shell:
    """The user's shell on the scratch home: the installed commands, with the home's settings."""

    def __init__(self, env, tmp_path: Path):
        self.vars = {**os.environ, "ATLASMART_HOME": str(env.home), "ATLASMART_LANDING": str(env.landing),
                     "ATLASMART_CLOCK": "logical", "PYTHONUNBUFFERED": "1"}
        self.vars.pop("DAGSTER_HOME", None)
        self.cwd = tmp_path

    def __call__(self, *args, ok: bool = True) -> str:
        out = subprocess.run([str(a) for a in args], env=self.vars, capture_output=True, text=True, timeout=300,
                             cwd=REPO, check=False)
        if ok:
            assert out.returncode == 0, (args, out.stdout[-2000:], out.stderr[-3000:])
        return out.stdout

    def status(self) -> dict[str, dict]:
        """``atlasmart --json status``: the consumer-visible state per day."""
        return {s["partition"]: s for s in json.loads(self(BIN / "atlasmart", "--json", "status"))}


def _served_by_status(status: dict[str, dict], asset: str) -> dict[str, str]:
    """What the served asset must show per sample day, from ``atlasmart status``."""
    expected = {}
    for day in SAMPLE_DAYS:
        assets = {a["asset"]: a for a in status.get(day, {}).get("assets", [])}
        expected[day] = "MATERIALIZED" if assets.get(asset, {}).get("served_version") else "MISSING"
    return expected


def _partition_states_on_page(page, base: str, asset: str, days, shot, name: str) -> dict[str, str]:
    """The status dot of each day in the asset's Partitions tab, as the page shows it."""
    from playwright.sync_api import expect

    page.goto(f"{base}/assets/{asset}?view=partitions")
    box = page.get_by_placeholder("Filter by name")
    states = {}
    for day in days:
        box.fill(day)
        row = page.locator("[class*='VirtualizedTable_row']").filter(has=page.locator(f"[title='{day}']"))
        expect(row).to_have_count(1)
        style = row.locator("div[style*='border-radius: 100%']").get_attribute("style") or ""
        colour = re.search(r"--color-accent-([a-z]+)", style)
        assert colour and colour.group(1) in DOT_STATES, f"{asset} {day}: unknown status dot {style!r}"
        states[day] = DOT_STATES[colour.group(1)]
    box.fill("")
    shot(name)
    return states


def _served_metadata_on_page(page, base: str, asset: str, day: str) -> dict[str, str]:
    """The metadata the served asset's Partitions tab shows for ``day`` (label -> text)."""
    from playwright.sync_api import expect

    page.goto(f"{base}/assets/{asset}?view=partitions&partition={day}")
    expect(page.get_by_text("certified_at", exact=True).first).to_be_visible()
    values = {}
    for label in ("version", "certified_at", "fingerprint", "certified_by_run"):
        cell = page.locator("tr").filter(has=page.get_by_text(label, exact=True)).first
        values[label] = cell.locator("td").nth(1).inner_text().strip()  # label, value, (actions)
    return values


def _wait(instance, predicate, what: str, log: Path):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() > deadline:
            state = [(r.run_id[:8], r.job_name, r.status.value) for r in instance.get_runs()]
            raise AssertionError(f"{what}: not in {DEADLINE_S}s; runs {state}\n{log.read_text()[-4000:]}")
        time.sleep(2)


def _screenshots(tmp_path: Path) -> Path:
    """Where a browser test keeps its screenshots: ``$ATLASMART_TEST_ARTIFACTS``, else the test's scratch folder."""
    shots = Path(os.environ.get("ATLASMART_TEST_ARTIFACTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {shots}")
    return shots


def test_the_ui_shows_per_day_what_consumers_are_served(env, tmp_path):
    sync_playwright = _browser_or_skip()
    from playwright.sync_api import expect

    shots = _screenshots(tmp_path)
    sh = Shell(env, tmp_path)
    sh(BIN / "atlasmart", "--clock", "logical", "clock", "set", LOGICAL_NOW)
    dagster_home = Path(sh(BIN / "atlasmart", "dagster-home").strip())
    sh.vars["DAGSTER_HOME"] = str(dagster_home)
    workspace = REPO / "workspace.yaml"
    # The sensor is on by default; an operator stopped it, and the runs below end while it is off.
    sh(BIN / "dagster", "sensor", "stop", "certification_sensor", "-w", workspace)

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "dagster-dev.log"
    with open(log, "w") as log_file:
        server = subprocess.Popen(
            [BIN / "dagster", "dev", "-w", workspace, "-h", "127.0.0.1", "-p", str(port)],
            env=sh.vars, cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        _wait_for_ui(base, server, log)
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

            def served_matches_status(stage: str) -> dict[str, dict]:
                status = sh.status()
                on_page = _partition_states_on_page(page, base, SERVED, SAMPLE_DAYS, shot, f"served-{stage}")
                assert on_page == _served_by_status(status, MART), (stage, on_page, status)
                return status

            try:
                # 1. The README's order, with the sensor off.
                launched = [_launch_one_day_from_the_job_page(page, base, shot, day) for day in JOB_PAGE_DAYS]
                backfill_id = _launch_range_backfill_from_the_asset_graph(page, base, shot)
                runs = _wait(instance, lambda: _ended(instance, launched, backfill_id), "the UI launches", log)
                assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs.values()), runs
                # Built, not certified: the mart is green, the served asset says what consumers get (nothing).
                built = _partition_states_on_page(page, base, MART, SAMPLE_DAYS, shot, "mart-built")
                assert set(built.values()) == {"MATERIALIZED"}, built
                status = served_matches_status("built-not-certified")
                assert not any(s["certified_version"] for s in status.values())

                # 2. The sensor turned on in the UI catches up on every run that ended while it was off.
                _turn_on_sensor(page, base, shot, "certification_sensor")
                _wait(instance, lambda: all(s["state"] == "CERTIFIED" for s in sh.status().values())
                      and len(sh.status()) >= len(SAMPLE_DAYS), "certification after the sensor was turned on", log)
                status = served_matches_status("certified")
                assert {d: s["certified_version"] for d, s in status.items() if d in SAMPLE_DAYS} == dict.fromkeys(
                    SAMPLE_DAYS, 1)
                _served_state_picture(page, base, shots)

                # Each check evaluation names its day in the Partition column.
                assert sorted(_partition_column(page, base, MART, "mart_matches_agg_and_metric", shot)) == SAMPLE_DAYS
                # Every UI-launched run shows its lane in Runs.
                lanes = _lanes_on_the_runs_page(page, base, shot, runs)
                assert lanes == {launched[0]: "current", launched[1]: "backfill", "backfill": "backfill"}, lanes

                # 3. A held restatement: the day keeps serving v1, and stays green.
                _resend_doubled(env, RESTATED_DAY)
                sh(BIN / "atlasmart", "backfill", "--from", RESTATED_DAY, "--to", RESTATED_DAY, "--operator", "oncall",
                   "--reason", "ERP re-send", ok=False)
                status = served_matches_status("restatement-held")
                assert status[RESTATED_DAY]["state"] == "RESTATEMENT_HELD"

                # 4. A withdrawal: the day is no longer served, and no longer green.
                opened = json.loads(sh(BIN / "atlasmart", "--json", "incident", "report", "--actor",
                                       "finance-analyst@atlasmart.example", "--partition", WITHDRAWN_DAY,
                                       "--text", "revenue for the 20th looks wrong"))
                sh(BIN / "atlasmart", "incident", "contain", opened["incident"], "--actor", "oncall@atlasmart.example")
                status = served_matches_status("withdrawn")
                assert status[WITHDRAWN_DAY]["state"] == "WITHDRAWN"

                # 5. A reload of the delivered current day from the shell: still served, certified_at unchanged.
                before = _served_metadata_on_page(page, base, SERVED, CURRENT_DAY)
                served_before = {a["asset"]: a for a in status[CURRENT_DAY]["assets"]}[MART]
                assert before["certified_at"] == served_before["certified_at"]
                sh(BIN / "dagster", "asset", "materialize", "-m", "atlasmart_dagster", "--partition", CURRENT_DAY,
                   "--select", ",".join(DAILY_CHAIN))
                _wait(instance, lambda: _reload_certified(sh, CURRENT_DAY, served_before), "the reload certified",
                      log)
                served_matches_status("after-reload")
                after = _served_metadata_on_page(page, base, SERVED, CURRENT_DAY)
                assert after["certified_by_run"] != before["certified_by_run"]  # the reload's build is served now
                assert after["certified_at"] == before["certified_at"] and after["version"] == before["version"]
            except Exception:
                with contextlib.suppress(Exception):  # the page as it was; never hide the failure itself
                    page.screenshot(path=str(shots / "failure.png"))
                raise
            finally:
                browser.close()
    finally:
        _stop(server)


def _ended(instance, launched: list[str], backfill_id: str) -> dict[str, dg.DagsterRun] | None:
    """The launched runs by id prefix (and the backfill's run as "backfill"), once all have ended."""
    runs = instance.get_runs()
    found = {prefix: next((r for r in runs if r.run_id.startswith(prefix)), None) for prefix in launched}
    in_backfill = [r for r in runs if r.tags.get(DAGSTER_BACKFILL_TAG) == backfill_id]
    if not in_backfill or any(r is None for r in found.values()):
        return None
    found["backfill"] = in_backfill[0]
    return found if all(r.status in ENDED for r in found.values()) else None


def _reload_certified(sh: Shell, day: str, served_before: dict) -> bool:
    status = sh.status()[day]
    served = {a["asset"]: a for a in status["assets"]}[MART]
    return status["state"] == "CERTIFIED" and served["snapshot_id"] != served_before["snapshot_id"]


def _resend_doubled(env, day: str) -> None:
    """The ERP re-sends ``day`` with every amount doubled (a new batch)."""
    rows = [{**r, "source_seq": r["source_seq"] + 100,
             "line_amount_usd": f"{2 * float(r['line_amount_usd']):.2f}",
             "line_cost_usd": f"{2 * float(r['line_cost_usd']):.2f}"} for r in read_rows(env.day_dir(day))]
    write_batch(env.day_dir(day), rows, batch_id=f"ERP-{day.replace('-', '')}-02", ready_at="2026-09-22T08:00:00Z")


def _launch_one_day_from_the_job_page(page, base: str, shot, day: str) -> str:
    """``daily_sales_job`` -> *Materialize all…* -> one day -> *Launch 1 run*; the run id's prefix."""
    from playwright.sync_api import expect

    page.goto(f"{base}/locations/atlasmart_dagster/jobs/daily_sales_job")
    page.get_by_role("button", name="Materialize all").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_text(f"Launch runs to materialize {len(DAILY_CHAIN)} assets")).to_be_visible()
    _pick_partitions(page, dialog, day, "1 partition")
    shot(f"job-page-{day}")
    dialog.get_by_role("button", name="Launch 1 run").click()
    toast = page.get_by_text(re.compile(r"Launched run [0-9a-f]{8}"))
    expect(toast).to_be_visible()
    prefix = re.search(r"Launched run ([0-9a-f]{8})", toast.inner_text()).group(1)
    expect(toast).to_be_hidden()  # the next launch's toast must not be confused with this one
    return prefix


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
    expect(dialog.get_by_text(f"Launch runs to materialize {len(DAILY_CHAIN)} assets")).to_be_visible()
    _pick_partitions(page, dialog, f"[{RANGE_DAYS[0]}...{RANGE_DAYS[-1]}]", f"{len(RANGE_DAYS)} partitions")
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


def _turn_on_sensor(page, base: str, shot, name: str) -> None:
    """The sensor's page, its on/off switch, on."""
    from playwright.sync_api import expect

    page.goto(f"{base}/locations/atlasmart_dagster/sensors/{name}")
    switch = page.locator("input[type=checkbox]").first
    expect(switch).not_to_be_checked()
    page.locator("label:has(input[type=checkbox])").first.click()  # the input itself is drawn over
    expect(switch).to_be_checked()
    shot(f"{name}-on")


def _served_state_picture(page, base: str, shots: Path) -> None:
    """The README's screenshot: the served asset's Partitions tab with every sample day served."""
    page.goto(f"{base}/assets/{SERVED}?view=partitions&partition={CURRENT_DAY}")
    page.get_by_text("certified_at", exact=True).first.wait_for()
    page.screenshot(path=str(shots / "served-state.png"))


def _partition_column(page, base: str, asset: str, check: str, shot) -> list[str]:
    """The *Partition* cells of a check's Execution history, one per evaluation."""
    from playwright.sync_api import expect

    page.goto(f"{base}/assets/{asset}?view=checks")
    page.get_by_text(check, exact=True).first.click()
    page.get_by_role("tab", name="Execution history").click()
    header = page.locator("table thead th")
    expect(header.filter(has_text="Partition")).to_have_count(1)
    names = [h.inner_text().strip() for h in header.all()]
    column = names.index("Partition")
    rows = page.locator("table tbody tr")
    expect(rows.first).to_be_visible()
    shot(f"{check}-history")
    return [row.locator("td").nth(column).inner_text().strip() for row in rows.all()]


def _lanes_on_the_runs_page(page, base: str, shot, runs: dict[str, dg.DagsterRun]) -> dict[str, str]:
    """The ``atlasmart/lane`` tag each run shows in Runs (runs within backfills shown too)."""
    from playwright.sync_api import expect

    page.goto(f"{base}/runs")
    page.get_by_text("Show runs within backfills").click()
    prefixes = {name: run.run_id[:8] for name, run in runs.items()}
    for prefix in prefixes.values():
        expect(page.get_by_role("link", name=f"run {prefix}")).to_be_visible()
    # Each row reads "<id> … atlasmart/lane: <lane> …" up to the next row's id.
    text = page.locator("body").inner_text()
    starts = sorted((text.index(prefix), name) for name, prefix in prefixes.items())
    lanes = {}
    for (at, name), (end, _) in zip(starts, starts[1:] + [(len(text), None)]):
        found = re.search(r"atlasmart/lane: (\w+)", text[at:end])
        lanes[name] = found.group(1) if found else None
    shot("runs-with-lanes")
    return lanes
