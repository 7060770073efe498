"""The guard, batch retirement and game days through the real command line."""

import json

from atlasmart_dagster.cli.main import main
from atlasmart_dagster_tests.landing_batches import read_rows, write_batch

DAY = "2026-09-19"


def cli(env, capsys, *args, clock=None):
    base = ["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", "--json"]
    code = main(base + (["--clock", clock] if clock else []) + list(args))
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip().startswith(("{", "[")) else out)


def status(env, capsys, day=DAY):
    code, (state,) = cli(env, capsys, "status", "--partition", day)
    return state["state"], state["certified_version"]


def backfill(env, capsys, reason):
    return cli(env, capsys, "backfill", "--from", DAY, "--to", DAY, "--operator", "oncall", "--reason", reason)


def test_a_doubled_resend_is_held_then_rejected_and_v1_is_still_served(env, capsys):
    assert backfill(env, capsys, "first load")[0] == 0
    assert status(env, capsys) == ("CERTIFIED", 1)
    rows = [{**r, "source_seq": r["source_seq"] + 100, "line_amount_usd": "200.00", "line_cost_usd": "120.00"}
            for r in read_rows(env.day_dir(DAY))]
    write_batch(env.day_dir(DAY), rows, batch_id="ERP-20260919-02")
    code, _ = backfill(env, capsys, "ERP re-send")
    assert code == 1  # built and checked, certification held
    assert status(env, capsys) == ("RESTATEMENT_HELD", 1)
    code, batches = cli(env, capsys, "batch", "list", "--day", DAY)
    assert [(b["batch_id"], b["state"]) for b in batches] == [("ERP-20260919-01", "accepted"),
                                                             ("ERP-20260919-02", "accepted")]
    assert cli(env, capsys, "batch", "retire")[0] == 1  # needs a batch, --by and --reason: one clean line
    assert cli(env, capsys, "batch", "retire", "ERP-20260919-02", "--by", "finance-owner",
               "--reason", "doubled amounts: ERP bug")[0] == 0
    assert backfill(env, capsys, "reload without the bad batch")[0] == 0
    assert status(env, capsys) == ("CERTIFIED", 1)
    code, batches = cli(env, capsys, "batch", "list", "--day", DAY)
    assert batches[1]["state"] == "retired" and batches[1]["reason"] == "doubled amounts: ERP bug"


def test_the_owner_approves_a_held_restatement(env, capsys):
    backfill(env, capsys, "first load")
    rows = [{**r, "source_seq": r["source_seq"] + 100, "line_amount_usd": "200.00", "line_cost_usd": "120.00"}
            for r in read_rows(env.day_dir(DAY))]
    write_batch(env.day_dir(DAY), rows, batch_id="ERP-20260919-02")
    backfill(env, capsys, "ERP re-send")
    code, result = cli(env, capsys, "restatement", "approve", "--day", DAY, "--owner", "erp-operations",
                       "--by", "dana", "--reason", "price correction confirmed by the ERP team")
    assert code == 0 and result["approved_controls"]["revenue_usd"] == "200.00"
    assert status(env, capsys) == ("CERTIFIED", 2)


def test_a_game_day_ticks_the_schedule_and_sensors_as_the_daemon_would(env, capsys):
    assert cli(env, capsys, "clock", "set", "2026-09-22T08:20:00Z")[0] == 0
    code, report = cli(env, capsys, "tick", clock="logical")
    assert code == 0
    assert report["scheduled"] == ["2026-09-21"]  # the 08:00 schedule, for yesterday
    assert sorted(report["sensor"]) == ["2026-09-17", "2026-09-18", "2026-09-19", "2026-09-20"]
    assert sorted(d for r in report["runs"] for d in r["certified"]) == [
        "2026-09-17", "2026-09-18", "2026-09-19", "2026-09-20", "2026-09-21"]
    code, again = cli(env, capsys, "tick", clock="logical")
    assert again["scheduled"] == [] and again["sensor"] == [] and again["runs"] == []  # nothing twice
    assert cli(env, capsys, "clock", "advance", "1440")[0] == 0
    code, next_day = cli(env, capsys, "tick", clock="logical")
    assert next_day["scheduled"] == ["2026-09-22"] and next_day["runs"][0]["success"] is False  # not landed
    assert status(env, capsys, "2026-09-22")[0] == "DELAYED"


def test_logical_time_can_be_set_on_a_new_home_under_the_logical_clock(env, capsys):
    """`clock set` is how logical time gets set: it must not demand that it is set already."""
    code, out = cli(env, capsys, "status", clock="logical")
    assert code == 2  # every other command refuses, and says how to set it
    code, out = cli(env, capsys, "clock", "set", "2026-09-22T08:00:00Z", clock="logical")
    assert code == 0
    code, out = cli(env, capsys, "clock", "show", clock="logical")
    assert code == 0 and out["now"] == "2026-09-22T08:00:00Z"
