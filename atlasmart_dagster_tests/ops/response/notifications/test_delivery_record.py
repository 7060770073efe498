"""Each delivery is recorded in the ledger, on SQLite and on Postgres: sent once, retried on the backoff's schedule."""

from datetime import timedelta

from atlasmart_dagster.ops.response.notifications import deliver_pending
from atlasmart_dagster.store.clock import LogicalClock, format_ts, parse_ts
from atlasmart_dagster.store.ledger.notification_deliveries import FAILED, NOTIFICATION_DELIVERIES, SENT
from atlasmart_dagster_tests.environment import Env
from atlasmart_dagster_tests.team_database import deployment  # noqa: F401 - embedded and team

from .incidents_to_tell import config, open_incident, resolve
from .receivers import free_port

DAY = "2026-09-20"
T0 = "2026-09-22T09:00:00Z"


def test_a_message_is_sent_once_and_recorded_sent(env, http):
    channels = config(f"  slack: {{kind: webhook, url: '{http.url()}'}}", "[slack]")
    incident = open_incident(env.platform, DAY)
    first = deliver_pending(env.platform, config=channels)
    assert [(s["key"], s["channel"], s["attempt"]) for s in first.sent] == [(f"{incident.id}:e1", "slack", 1)]
    assert first.problem is None and len(http.bodies()) == 1
    assert deliver_pending(env.platform, config=channels).sent == []  # recorded sent: never again
    assert len(http.bodies()) == 1
    resolve(env.platform, incident.id)
    assert [s["kind"] for s in deliver_pending(env.platform, config=channels).sent] == ["incident_resolved"]
    (opened, resolved) = env.ledger.notifications.attempts()
    assert (opened["outcome"], opened["route"], opened["kind"]) == (SENT, "oncall", "incident_opened")
    assert resolved["message_key"] == f"{incident.id}:e3" and resolved["error"] is None
    assert NOTIFICATION_DELIVERIES.name in env.ledger.engine.table_names()


def test_a_failed_send_is_retried_when_its_backoff_is_over_then_given_up(tmp_path, deployment):  # noqa: F811
    env = Env(tmp_path, clock="logical")
    clock = LogicalClock(env.home / "clock.json")
    clock.set(T0)
    down = config(f"  slack: {{kind: webhook, url: 'http://127.0.0.1:{free_port()}/hook'}}", "[slack]",
                  delivery="{max_attempts: 3, backoff_s: 60, backoff_max_s: 100}")
    incident = open_incident(env.platform, DAY)

    report = deliver_pending(env.platform, config=down)
    (failed,) = report.failed
    assert failed["attempt"] == 1 and "connection refused" in failed["error"]
    assert failed["next_attempt_at"] == "2026-09-22T09:01:00Z"  # backoff_s after the first attempt

    clock.set("2026-09-22T09:00:30Z")  # not due yet: nothing is attempted
    assert deliver_pending(env.platform, config=down).to_json() == {"sent": [], "failed": [], "gave_up": [],
                                                                     "deferred": [], "problem": None}
    clock.set("2026-09-22T09:01:00Z")
    (failed,) = deliver_pending(env.platform, config=down).failed
    assert failed["attempt"] == 2 and failed["next_attempt_at"] == "2026-09-22T09:02:40Z"  # doubled, capped at 100 s
    clock.set("2026-09-22T09:05:00Z")
    (gave_up,) = deliver_pending(env.platform, config=down).gave_up
    assert gave_up["attempt"] == 3
    clock.set("2026-09-23T09:00:00Z")
    assert deliver_pending(env.platform, config=down).to_json()["gave_up"] == []  # given up: never again
    rows = env.ledger.notifications.attempts(message_key=f"{incident.id}:e1")
    assert [(r["outcome"], r["attempt"]) for r in rows] == [(FAILED, 1), (FAILED, 2), ("GAVE_UP", 3)]
    assert rows[-1]["next_attempt_at"] is None
    assert parse_ts(rows[0]["next_attempt_at"]) - parse_ts(rows[0]["at"]) == timedelta(seconds=60)


def test_an_event_older_than_the_age_limit_is_not_announced(tmp_path, deployment, http):  # noqa: F811
    env = Env(tmp_path, clock="logical")
    clock = LogicalClock(env.home / "clock.json")
    clock.set(T0)
    open_incident(env.platform, DAY)
    clock.set(format_ts(parse_ts(T0) + timedelta(hours=25)))  # a channel added a day later does not replay history
    channels = config(f"  slack: {{kind: webhook, url: '{http.url()}'}}", "[slack]", delivery="{max_age_h: 24}")
    assert deliver_pending(env.platform, config=channels).sent == [] and http.bodies() == []
    assert env.ledger.notifications.attempts() == []
