"""A day is certified while every channel is dead: delivery runs beside the load, fails, records, never gets in its
way."""

import threading
import time

from atlasmart_dagster.ops.response.incidents.detection import consumer_report
from atlasmart_dagster.ops.response.notifications import deliver_pending
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster.store.ledger.notification_deliveries import FAILED
from atlasmart_dagster.store.platform import Platform

from .incidents_to_tell import config
from .receivers import HttpReceiver, free_port

DAY = "2026-09-20"


def test_a_day_is_certified_while_the_channels_are_down_or_hanging(env):
    hanging = HttpReceiver(delay=30)  # answers long after any timeout
    dead = config(f"  refused: {{kind: webhook, url: 'http://127.0.0.1:{free_port()}/hook', timeout_s: 1}}\n"
                  f"  hanging: {{kind: webhook, url: '{hanging.url()}', timeout_s: 1}}", "[refused, hanging]",
                  delivery="{max_attempts: 100, backoff_s: 0}")
    # something to tell while the day loads: a consumer's report opens an incident
    consumer_report(env.platform, "finance-analyst@atlasmart.example", "yesterday's revenue looks low", None,
                    "2026-09-19")
    # the sensor's process: its own platform over the same home, delivering again and again during the load
    sensor = Platform.open(home=str(env.home), landing=str(env.landing))
    stop, reports, raised = threading.Event(), [], []

    rounds = []  # (started, ended) of every delivery round, to show they overlapped the load

    def keep_delivering():
        # delivers until the load is over and at least two rounds have run: a fast load (a busy CI machine's
        # scheduling varies) must not make the test pass or fail on how many rounds fitted into it
        while not stop.is_set() or len(reports) < 2:
            try:
                began = time.monotonic()
                reports.append(deliver_pending(sensor, config=dead))
                rounds.append((began, time.monotonic()))
            except BaseException as exc:  # noqa: BLE001 - deliver_pending must never raise: collected to fail
                raised.append(exc)
                return

    delivering = threading.Thread(target=keep_delivering)
    delivering.start()
    try:
        started = time.monotonic()
        outcome = run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill")
        ended = time.monotonic()
    finally:
        stop.set()
        delivering.join(timeout=60)
        hanging.close()
    assert outcome.success and outcome.certified == [DAY], outcome.failures
    assert partition_status(env.platform, DAY).state == "CERTIFIED"
    assert not raised and len(reports) >= 2, f"delivery ran {len(reports)} times, raised {raised}"
    beside = [r for r in rounds if r[0] < ended and r[1] > started]
    assert beside, f"no delivery round ran during the {ended - started:.1f} s load: {rounds}"
    attempts = env.ledger.notifications.attempts()
    assert {r["channel"] for r in attempts} == {"refused", "hanging"} and {r["outcome"] for r in attempts} == {FAILED}
    assert {r["error"] for r in attempts} == {"connection refused (nothing listens there)",
                                              "no answer within 1 s (timed out)"}
