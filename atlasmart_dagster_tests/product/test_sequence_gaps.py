"""A gap in source_seq beyond the contract's tolerance holds the day for its owner (issue 35, finding 2).

History is committed up to 208 (the sample). 2026-09-22 arrives as 5 rows
numbered 230..234 with a truthful manifest: every rule accepts it, but 21
numbers the ERP emitted never arrived. The day is held like an anomaly,
the missing range named on every surface; the owner approves it (the ERP
skipped numbers on purpose) or the late batch that carries them closes the gap.
"""

import json

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.product.batch_lifecycle import sequence_gaps
from atlasmart_dagster.store.clock import LogicalClock
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAY = "2026-09-22"
MISSING = "source_seq 209..229 missing"


def cli(env, capsys, *args):
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--clock", "logical", "--ephemeral-instance",
                 *args])
    return code, capsys.readouterr().out


def deliver(env, seqs, batch: int = 1) -> dict:
    """Rows of 2026-09-22 (2026-09-21's lines as a template) numbered ``seqs``, with a truthful manifest."""
    template = read_rows(env.day_dir("2026-09-21"))
    rows = [{**template[i % len(template)], "source_seq": seq, "order_id": f"O22{batch}{i:02d}", "line_no": 1,
             "sales_date": DAY, "event_ts": f"{DAY}T09:00:00Z"} for i, seq in enumerate(seqs)]
    return write_batch(env.day_dir(DAY), rows, batch_id=f"ERP-20260922-{batch:02d}", ready_at="2026-09-23T08:04:00Z")


def backfill(env, capsys, day: str, end: str | None = None) -> tuple[int, str]:
    return cli(env, capsys, "backfill", "--from", day, "--to", end or day, "--operator", "oncall",
               "--reason", "load")


@pytest.fixture
def gapped(tmp_path, capsys):
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-24T07:00:00Z")
    code, out = backfill(env, capsys, SAMPLE_DAYS[0], SAMPLE_DAYS[-1])
    assert code == 0, out
    deliver(env, range(230, 235))
    env.load = backfill(env, capsys, DAY)
    return env


def status(env, capsys) -> dict:
    code, out = cli(env, capsys, "status", "--partition", DAY, "--json")
    (found,) = json.loads(out)
    return found


def test_a_day_past_a_gap_in_source_seq_is_held_with_the_missing_range_named(gapped, capsys):
    code, out = gapped.load
    assert code == 1 and MISSING in out, out  # the run's refusal names the range
    found = status(gapped, capsys)
    assert found["state"] == "ANOMALY_HELD" and MISSING in json.dumps(found), found
    assert "batch ERP-20260921-01 of 2026-09-21 (207..208)" in json.dumps(found)
    code, out = cli(gapped, capsys, "incident", "detect", "--json")
    (incident_id,) = json.loads(out)
    shown = json.loads(cli(gapped, capsys, "incident", "show", incident_id, "--json")[1])
    assert any(MISSING in s["detail"] for s in shown["signals"])
    assert "may be incomplete" in shown["title"]


def test_the_owner_approves_a_deliberate_skip_and_the_day_is_served(gapped, capsys):
    code, out = cli(gapped, capsys, "anomaly", "approve", "--day", DAY, "--owner", "erp-operations",
                    "--by", "erp data owner", "--reason", "the ERP skipped 209..229 on purpose (test numbers)")
    assert code == 0, out
    assert status(gapped, capsys)["state"] == "CERTIFIED"


def test_a_non_owner_cannot_approve_the_gap(gapped, capsys):
    code, out = cli(gapped, capsys, "anomaly", "approve", "--day", DAY, "--owner", "somebody", "--by", "x",
                    "--reason", "y")
    assert code == 1
    assert status(gapped, capsys)["state"] == "ANOMALY_HELD"


def test_the_late_batch_that_carries_the_numbers_closes_the_gap(gapped, capsys):
    deliver(gapped, range(209, 230), batch=2)
    code, out = backfill(gapped, capsys, DAY)
    assert code == 0, out
    assert "source_seq gap 209..229 closed: delivered by batch ERP-20260922-02" in out
    assert status(gapped, capsys)["state"] == "CERTIFIED"
    assert sequence_gaps(gapped.platform.ledger, [DAY]) == {}


def test_a_day_after_a_day_not_loaded_yet_is_not_judged(tmp_path, capsys):
    """The numbers between 2026-09-17 and 2026-09-19 belong to 2026-09-18, not loaded yet: no gap."""
    env = Env(tmp_path, clock="logical")
    LogicalClock(env.home / "clock.json").set("2026-09-24T07:00:00Z")
    assert backfill(env, capsys, "2026-09-17")[0] == 0
    code, out = backfill(env, capsys, "2026-09-19")
    assert code == 0, out
    assert sequence_gaps(env.platform.ledger, ["2026-09-19"]) == {}
