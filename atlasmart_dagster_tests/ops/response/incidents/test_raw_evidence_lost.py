"""Lost raw evidence opens one incident named by its mechanism (issue 35, finding 1)."""

import shutil

from atlasmart_dagster.ops.response.incidents.detection import detect
from atlasmart_dagster.store.ledger.incidents import IncidentStore
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import Env

DAY = "2026-09-19"


def test_a_lost_raw_copy_of_an_accepted_batch_opens_one_raw_evidence_incident(tmp_path):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-22T07:00:00Z")
    assert run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill").success
    assert detect(env.platform, env.instance) == []

    (stored,) = env.platform.raw_store.batches(DAY)
    folder = stored.data_path.parent
    for f in folder.iterdir():
        f.chmod(0o644)
    shutil.rmtree(folder)

    (incident_id,) = detect(env.platform, env.instance)
    (incident,) = IncidentStore(env.platform.ledger).open_incidents()
    assert incident.id == incident_id
    title = incident.title.lower()
    assert "raw evidence lost" in title and "restore from backup" in title and stored.batch_id in incident.title
    assert incident.partitions == [DAY] or DAY in incident.partitions

    # the refused re-run and later ticks add no second incident
    assert not run_chain(env.defs, env.instance, env.platform, [DAY], lane="backfill").success
    detect(env.platform, env.instance)
    assert detect(env.platform, env.instance) == []
    assert [i.id for i in IncidentStore(env.platform.ledger).open_incidents()] == [incident_id]
    assert not folder.exists()
