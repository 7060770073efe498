"""On-call hears of a day held for its data owner and of a lane blocked by a dead run, from what the product detects."""

import os
import signal

import dagster as dg

from atlasmart_dagster.ops.response.notifications import deliver_pending
from atlasmart_dagster.defs.automation.run_reaper import reap_dead_runs
from atlasmart_dagster_tests.ops.response.incidents.test_restatement_incident import DAY as HELD_DAY
from atlasmart_dagster_tests.ops.response.incidents.test_restatement_incident import held  # noqa: F401 - the fixture
from atlasmart_dagster_tests.defs.automation.test_run_reaper import run_in_a_child

from .incidents_to_tell import config


def test_a_held_restatement_tells_oncall_who_must_decide(held, http):  # noqa: F811 - the imported fixture
    channels = config(f"  slack: {{kind: webhook, url: '{http.url()}'}}", "[slack]")
    report = deliver_pending(held.platform, config=channels)
    kinds = {s["kind"]: s["key"] for s in report.sent}
    assert set(kinds) == {"incident_opened", "hold_waiting"}
    hold_key = kinds["hold_waiting"]
    refused = held.ledger.partitions.events(partition=HELD_DAY, states=("CERTIFICATION_REFUSED",))
    assert hold_key == f"hold:p{refused[0].id}"  # the ledger event of the held decision
    (hold,) = [b for b in http.bodies() if b["text"].startswith(f"{HELD_DAY} held for its data owner")]
    assert "restatement held for the data owner's approval" in hold["text"]
    fields = {f["text"].split("\n")[0]: f["text"].split("\n")[1] for f in hold["blocks"][2]["fields"]}
    assert fields["*Guard*"] == "restatement" and fields["*Incident*"] == held.incident
    assert f"atlasmart restatement approve --partition {HELD_DAY}" in str(hold["blocks"])
    assert deliver_pending(held.platform, config=channels).sent == []  # once


def test_a_run_whose_process_died_tells_oncall_its_lane_was_blocked(env, tmp_path, http):
    with run_in_a_child(tmp_path) as (home, child):
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    channels = config(f"  slack: {{kind: webhook, url: '{http.url()}'}}", "[slack]")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert deliver_pending(env.platform, instance=instance, config=channels).sent == []  # still STARTED
        (run_id,) = reap_dead_runs(instance)
        (sent,) = deliver_pending(env.platform, instance=instance, config=channels).sent
        assert (sent["key"], sent["kind"]) == (f"dead_run:{run_id}", "dead_run")
        assert deliver_pending(env.platform, instance=instance, config=channels).sent == []
    (body,) = http.bodies()
    assert body["blocks"][0]["text"]["text"] == "the backfill lane was blocked by a dead run"
    assert f"run {run_id} of long_job" in body["text"] and "is gone; marked failed to free its lane" in body["text"]
