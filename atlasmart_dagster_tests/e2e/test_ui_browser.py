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
``certified_at`` unchanged on the page), after a held anomaly (the next
morning the day after the sample arrives in cents) and after a failed UI
launch (a lying re-send of a served day, launched from the job page). It also
reads the *Partition* column of a check's *Execution history* and the
``atlasmart/lane`` tag of the UI-launched runs in *Runs*.

After the withdrawal, the anomaly and the failed launch it reads what the
served assets' checks say (``checks_match_status``): each ``certification_state``
headline (its status icon, the due days and the days it names as not served),
``open_incidents`` (never *Not Evaluated*; each open incident named), and the
*Partitions* counts of a chain check (``mart_matches_agg_and_metric``) and an
SLO check (``slo_freshness``), against ``atlasmart --json status`` and
``atlasmart --json incident list``. Right after the held restatement and the
withdrawal it reads ``certification_state``'s *Execution history*: one row
says what the day became, and it names no day outside that decision.

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
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pytest

from atlasmart_dagster.defs.assets.served import served_asset
from atlasmart_dagster.defs.partitions import daily_partitions
from atlasmart_dagster.store.tables import CERTIFIED_ASSETS, DAILY_CHAIN
from atlasmart_dagster.product.lanes import DAGSTER_BACKFILL_TAG
from atlasmart_dagster_tests.environment import SAMPLE_DAYS
from atlasmart_dagster_tests.landing_batches import read_manifest, read_rows, write_batch

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
# The day after the sample, first delivered in cents on the next morning: held by the anomaly guard.
ANOMALY_DAY, ANOMALY_MORNING = "2026-09-22", "2026-09-23T08:10:00Z"
FAILED_DAY = "2026-09-18"  # re-sent with a lying manifest and launched from the job page: the run fails
SERVED_ASSETS = [served_asset(product) for product in CERTIFIED_ASSETS]
CHAIN_CHECK = "mart_matches_agg_and_metric"  # on MART, evaluated in the chain's runs
SLO_OBJECTIVE = "freshness"  # slo_freshness on SERVED, reported by certification

UI_TIMEOUT_MS = 60_000  # a page waits for GraphQL answers while runs share the CPU
DEADLINE_S = 240
CHECKS_AGREE_S = 90  # how long the served checks may take to say what a change made (a sensor's next tick)
ENDED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
# The colour of the status dot beside each partition key in an asset's Partitions tab.
DOT_STATES = {"green": "MATERIALIZED", "gray": "MISSING", "red": "FAILED", "blue": "MATERIALIZING"}
# The colour of a check's status icon in an asset's Checks tab: what its newest evaluation says (a WARN failure
# is yellow, an ERROR one red; the word beside it reads "Failed" for both).
ICON_STATES = {"green": "PASSED", "red": "FAILED", "yellow": "WARN", "gray": "NOT_EVALUATED"}
# The counts above a check's Partitions tab, "Passed (3)"; "Execution Failed" before "Failed", which it contains.
PARTITION_COUNT = re.compile(r"(Execution Failed|Failed|In Progress|Missing|Skipped|Passed) \((\d+)\)")
# What ``atlasmart status`` calls a day's state, as certification_state reads it (docs/ui.md).
SERVING_STATES = {"CERTIFIED", "RESTATEMENT_PENDING", "RESTATEMENT_HELD"}
ERROR_STATES = {"DELAYED", "WITHDRAWN", "ANOMALY_HELD"}
NOT_BUILT_STATES = {"DELAYED", "PENDING"}
DAY = r"\d{4}-\d{2}-\d{2}"


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

            def checks_match_status(stage: str, failed_days=frozenset()) -> None:
                """Every served asset's headline and open_incidents, and the Partitions counts of a chain check and
                an SLO check, as the page shows them, against ``atlasmart --json status`` and the open incidents.

                Read again (status, incidents and pages) until they agree or ``CHECKS_AGREE_S`` passed: the
                daemon's sensors report what a command or a run changed on their next tick, not at once."""
                deadline = time.monotonic() + CHECKS_AGREE_S
                while True:
                    try:
                        return checks_agree(stage, failed_days)
                    except AssertionError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(5)

            def checks_agree(stage: str, failed_days) -> None:
                status = sh.status()
                incidents = _incidents(sh)
                for asset, product in zip(SERVED_ASSETS, CERTIFIED_ASSETS):
                    shown = _check_on_page(page, base, asset, "certification_state", shot, f"{stage}-{asset}")
                    assert _headline_of(shown) == _headline_by_status(status, product), (stage, asset, shown)
                    shown = _check_on_page(page, base, asset, "open_incidents", shot, f"{stage}-{asset}-incidents")
                    assert shown["state"] != "NOT_EVALUATED", (stage, asset, shown)
                    if incidents:
                        assert shown["state"] == "WARN", (stage, asset, shown)
                        missing = [i["id"] for i in incidents if i["id"] not in shown["description"]]
                        assert not missing, (stage, asset, "open incidents not named", missing, shown)
                    else:
                        assert shown["state"] == "PASSED", (stage, asset, shown)
                total = len(daily_partitions.get_partition_keys())
                chain = _partition_counts_on_page(page, base, MART, CHAIN_CHECK, total, shot)
                assert chain == _chain_counts_by_status(status, total, failed_days), (stage, chain, status)
                slo = _partition_counts_on_page(page, base, SERVED, f"slo_{SLO_OBJECTIVE}", total, shot)
                assert slo == _slo_counts_by_status(status, total), (stage, slo, status)

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
                # Reported by the command, then by the sensor: one row. (The withdrawal below wipes this history.)
                _wait_for_a_sensor_tick(base, "certification_sensor", time.time(), log)
                _one_row_for_the_decision(page, base, shot, sh.status(), RESTATED_DAY, "RESTATEMENT_HELD")

                # 4. A withdrawal: the day is no longer served, and no longer green.
                opened = json.loads(sh(BIN / "atlasmart", "--json", "incident", "report", "--actor",
                                       "finance-analyst@atlasmart.example", "--partition", WITHDRAWN_DAY,
                                       "--text", "revenue for the 20th looks wrong"))
                sh(BIN / "atlasmart", "incident", "contain", opened["incident"], "--actor", "oncall@atlasmart.example")
                status = served_matches_status("withdrawn")
                assert status[WITHDRAWN_DAY]["state"] == "WITHDRAWN"
                _wait_for_a_sensor_tick(base, "certification_sensor", time.time(), log)
                _one_row_for_the_decision(page, base, shot, sh.status(), WITHDRAWN_DAY, "WITHDRAWN")
                checks_match_status("withdrawn")

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

                # 6. A held anomaly: the next morning the day after the sample arrives in cents (every amount x100);
                # the anomaly guard holds it, nothing of it is served.
                sh(BIN / "atlasmart", "clock", "set", ANOMALY_MORNING)
                _deliver_in_cents(env, ANOMALY_DAY, WITHDRAWN_DAY)
                sh(BIN / "atlasmart", "backfill", "--from", ANOMALY_DAY, "--to", ANOMALY_DAY, "--include-current",
                   "--operator", "oncall", "--reason", "the ERP's delivery of the 22nd", ok=False)
                assert sh.status()[ANOMALY_DAY]["state"] == "ANOMALY_HELD"
                checks_match_status("anomaly-held")

                # 7. A failed UI launch: a lying re-send of a served day, launched from the job page. The run fails
                # (the manifest announces a row the file does not have); consumers keep the served version.
                _resend_lying(env, FAILED_DAY)
                failed = _launch_one_day_from_the_job_page(page, base, shot, FAILED_DAY)
                run = _wait(instance, lambda: _ended_run(instance, failed), "the failed UI launch", log)
                assert run.status == dg.DagsterRunStatus.FAILURE, run.status
                # incident_sensor opens the day's incident; open_incidents names it on every served asset.
                _wait(instance, lambda: FAILED_DAY in json.dumps(_incidents(sh)), "the failed launch's incident", log)
                status = served_matches_status("failed-ui-launch")
                assert status[FAILED_DAY]["state"] == "CERTIFIED"
                checks_match_status("failed-ui-launch", failed_days={FAILED_DAY})
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


def _ended_run(instance, prefix: str) -> dg.DagsterRun | None:
    run = next((r for r in instance.get_runs() if r.run_id.startswith(prefix)), None)
    return run if run is not None and run.status in ENDED else None


def _incidents(sh: Shell) -> list[dict]:
    """``atlasmart --json incident list``: the open incidents."""
    return json.loads(sh(BIN / "atlasmart", "--json", "incident", "list"))


def _wait_for_a_sensor_tick(base: str, sensor: str, since: float, log: Path) -> None:
    """Until the daemon finished a tick of ``sensor`` that started after ``since`` (what it reports is then written)."""
    query = json.dumps({"query": """query ($s: SensorSelector!) { sensorOrError(sensorSelector: $s) {
        ... on Sensor { sensorState { ticks(limit: 3) { timestamp status } } } } }""", "variables": {"s": {
        "repositoryLocationName": "atlasmart_dagster", "repositoryName": "__repository__", "sensorName": sensor}}})
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        ticks = _http_json(f"{base}/graphql", query.encode())["data"]["sensorOrError"]["sensorState"]["ticks"]
        if any(t["timestamp"] > since and t["status"] != "STARTED" for t in ticks):
            return
        time.sleep(2)
    raise AssertionError(f"no tick of {sensor} ended in {DEADLINE_S}s:\n{log.read_text()[-3000:]}")


def _deliver_in_cents(env, day: str, like: str) -> None:
    """The ERP delivers ``day`` for the first time, the orders of ``like`` with every amount x100 (sent in cents),
    numbered on from the newest sequence it sent."""
    rows = read_rows(env.day_dir(like))
    seq = max(read_manifest(d)["source_seq_high"] for d in env.landing.glob("sales_date=*")) + 1
    rows = [{**r, "source_seq": seq + i, "order_id": f"{r['order_id']}-{day}", "sales_date": day,
             "event_ts": r["event_ts"].replace(like, day),
             "line_amount_usd": f"{100 * float(r['line_amount_usd']):.2f}",
             "line_cost_usd": f"{100 * float(r['line_cost_usd']):.2f}"} for i, r in enumerate(rows)]
    write_batch(env.day_dir(day), rows, batch_id=f"ERP-{day.replace('-', '')}-01",
                ready_at=ANOMALY_MORNING.replace("08:10", "08:00"))


def _resend_lying(env, day: str) -> None:
    """The ERP re-sends ``day`` unchanged with a manifest announcing one row more than the file holds."""
    rows = read_rows(env.day_dir(day))
    write_batch(env.day_dir(day), rows, batch_id=f"ERP-{day.replace('-', '')}-02", expected_rows=len(rows) + 1)


def _check_on_page(page, base: str, asset: str, check: str, shot, name: str) -> dict:
    """What the asset's Checks tab shows of ``check``: the state of its status icon (``ICON_STATES``), the word
    beside it, and its latest execution's description and result (None: not evaluated)."""
    from playwright.sync_api import expect

    page.goto(f"{base}/assets/{asset}?view=checks&checkDetail={check}")
    # The list on the left: each check's name is in an element titled with it; its row holds the status icon
    # (role=img, coloured by --icon-color) and the status word (a span styled text-transform: capitalize).
    expect(page.locator(f"[title='{check}']").first).to_be_visible()
    item = page.locator(f"[title='{check}']").first.evaluate("""(el) => {
        for (let row = el; row; row = row.parentElement) {
            const icon = row.querySelector('[role=img]');
            const word = row.querySelector('span[style*="capitalize"]');
            if (icon && word) return {icon: icon.getAttribute('style') || '', word: word.innerText.trim()};
        }
        return null;
    }""")
    assert item, f"{asset} {check}: no status in the Checks list"
    colour = re.search(r"--icon-color: var\(--color-accent-([a-z]+)\)", item["icon"])
    assert colour and colour.group(1) in ICON_STATES, f"{asset} {check}: unknown status icon {item!r}"
    shown = {"state": ICON_STATES[colour.group(1)], "word": item["word"], "description": None, "result": None}
    if shown["word"].lower() != "not evaluated":
        # The check's Overview tab: "Latest execution", its description, then "Evaluation result" and the result.
        expect(page.get_by_text("Latest execution", exact=True)).to_be_visible()
        expect(page.get_by_text("Evaluation result", exact=True).first).to_be_visible()
        text = page.locator("body").inner_text()
        found = re.search(r"Latest execution\n(.*?)\nEvaluation result\n+(\w+)", text, re.S)
        assert found, f"{asset} {check}: no latest execution on the page"
        shown["description"], shown["result"] = found.group(1).strip(), found.group(2)
    shot(f"{name}-{check}")
    return shown


def _headline_of(shown: dict) -> tuple[str, int, dict[str, str]]:
    """certification_state as the page shows it: (PASSED/FAILED/WARN, due days, unserved day -> state)."""
    assert shown["description"], shown
    first = shown["description"].splitlines()[0]
    counted = re.match(r"(\d+) of (\d+) due days served; not served: (.*)", first)
    if counted:
        unserved = dict(re.findall(rf"({DAY}) ([A-Z_]+)", counted.group(3)))
        assert int(counted.group(2)) - int(counted.group(1)) == len(unserved), first
        return shown["state"], int(counted.group(2)), unserved
    every = re.match(r"all (\d+) due days served", first)
    assert every, f"certification_state: unknown headline {first!r}"
    return shown["state"], int(every.group(1)), {}


def _headline_by_status(status: dict[str, dict], product: str) -> tuple[str, int, dict[str, str]]:
    """What certification_state must say of ``product`` by ``atlasmart status`` (docs/ui.md): due days are every
    day but those not due yet; a due day is unserved unless it serves a version; ERROR while an unserved day is
    DELAYED, ANOMALY_HELD or WITHDRAWN, WARN for any other."""
    due, unserved = 0, {}
    for day, s in status.items():
        assets = {a["asset"]: a for a in s["assets"]}
        served = s["state"] in SERVING_STATES and bool(assets.get(product, {}).get("served_version"))
        if s["state"] == "PENDING" and not served:
            continue
        due += 1
        if not served:
            unserved[day] = s["state"]
    verdict = "PASSED" if not unserved else "FAILED" if set(unserved.values()) & ERROR_STATES else "WARN"
    return verdict, due, unserved


def _partition_counts_on_page(page, base: str, asset: str, check: str, total: int, shot) -> dict[str, int]:
    """The counts above a check's Partitions tab, over all its partitions ("Passed (3)" -> {"Passed": 3})."""
    from playwright.sync_api import expect

    page.goto(f"{base}/assets/{asset}?view=checks&checkDetail={check}")
    # Two tabs are named Partitions: the asset's (a link) and the check's (a button).
    page.locator("button[role=tab]").filter(has_text="Partitions").click()
    page.get_by_role("button", name="All", exact=True).click()
    expect(page.get_by_text(f"{total} Partitions Selected", exact=True)).to_be_visible()
    expect(page.get_by_text(PARTITION_COUNT).first).to_be_visible()
    counts = {label: int(n) for label, n in PARTITION_COUNT.findall(page.locator("body").inner_text())}
    shot(f"{check}-partitions")
    assert sum(counts.values()) == total, (check, counts, total)
    return counts


def _counts(total: int, passed: int = 0, failed: int = 0, execution_failed: int = 0) -> dict[str, int]:
    counts = {"Execution Failed": execution_failed, "Failed": failed, "In Progress": 0, "Skipped": 0, "Passed": passed}
    counts["Missing"] = total - sum(counts.values())
    return counts


def _chain_counts_by_status(status: dict[str, dict], total: int, failed_days) -> dict[str, int]:
    """The chain check's days: every day built (any state but DELAYED or PENDING) passed its newest build's
    reconciliation, except a day whose newest run failed before the check ran (Dagster: Execution Failed); the
    other partitions were never built (Missing)."""
    built = {day for day, s in status.items() if s["state"] not in NOT_BUILT_STATES}
    failed = built & set(failed_days)
    return _counts(total, passed=len(built - failed), execution_failed=len(failed))


def _slo_counts_by_status(status: dict[str, dict], total: int) -> dict[str, int]:
    """An SLO check's days: each served day measured on the objective (its first delivery by the daily load),
    met (Passed) or missed (Failed) as recorded; a day not measured, or not served, is Missing."""
    met = missed = 0
    for s in status.values():
        served = any(a["asset"] == MART and a.get("served_version") for a in s["assets"])
        for result in s.get("slo") or []:
            if served and result["objective"] == SLO_OBJECTIVE:
                met, missed = (met + 1, missed) if result["met"] else (met, missed + 1)
    return _counts(total, passed=met, failed=missed)


def _history_rows(page, base: str, asset: str, check: str, shot) -> list[str]:
    """The *Description* cell of every row of a check's Execution history, newest first."""
    from playwright.sync_api import expect

    page.goto(f"{base}/assets/{asset}?view=checks&checkDetail={check}")
    page.locator("button[role=tab]").filter(has_text="Execution history").click()
    header = page.locator("table thead th")
    expect(header.filter(has_text="Description")).to_have_count(1)
    column = [h.inner_text().strip() for h in header.all()].index("Description")
    rows = page.locator("table tbody tr")
    expect(rows.first).to_be_visible()
    shot(f"{check}-history")
    # A long description is clipped behind "Show more"; the clipped text is still the cell's text.
    return [row.locator("td").nth(column).inner_text().strip() for row in rows.all()]


def _days_of(ranges: str) -> list[str]:
    """``2026-09-17...2026-09-19, 2026-09-21`` -> every day it names."""
    days = []
    for part in ranges.split(", "):
        first, _, last = part.partition("...")
        day = date.fromisoformat(first)
        while day <= date.fromisoformat(last or first):
            days.append(day.isoformat())
            day += timedelta(days=1)
    return days


def _decisions_of(description: str) -> dict[str, str]:
    """A certification_state row's ``This evaluation:`` line: each day it names -> what it says the day became."""
    line = next((l for l in description.splitlines() if l.startswith("This evaluation: ")), None)
    named = {}
    for group in (line or "").removeprefix("This evaluation: ").split("; "):
        found = re.match(rf"((?:{DAY}(?:\.\.\.{DAY})?)(?:, {DAY}(?:\.\.\.{DAY})?)*) (.+)", group)
        if found:
            named.update(dict.fromkeys(_days_of(found.group(1)), found.group(2)))
    return named


def _one_row_for_the_decision(page, base: str, shot, status: dict[str, dict], day: str, state: str) -> None:
    """The served asset's certification_state history, read right after ``day`` became ``state``: one row says
    so, and that row names no day outside its decision (each day it names, one by one or in a range, is now what
    the row says it became)."""
    rows = [_decisions_of(d) for d in _history_rows(page, base, SERVED, "certification_state", shot)]
    saying = [r for r in rows if r.get(day, "").split(" ")[0] == state]
    assert len(saying) == 1, (day, state, "rows saying it", saying)
    for named, became in saying[0].items():
        assert status[named]["state"] == became.split(" ")[0], (day, "names", named, became, status[named]["state"])
    newest = next(r for r in rows if day in r)
    assert newest is saying[0], (day, "a newer row names it", newest)
