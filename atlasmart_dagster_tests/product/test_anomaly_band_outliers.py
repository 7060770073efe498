"""The anomaly band is robust to a minority of small days in its history (issue 35, finding 6).

Real histories have holidays and partial days. A few of them among the 28
certified days dragged the band's low end (10th percentile / 1.75) so far
down that a day truncated to half passed; the same weekday's median now
bounds the low end too, and a day its owner approved as an anomaly is no
measure of a usual day.
"""

from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env

from .test_anomaly_guard import FIRST, NEXT_DAY, OWNER, cli, days_from, day_rows, generated_env, land

SMALL = {4, 11, 19}  # three holidays/partial days among the 28, none on the judged weekday


def test_a_half_day_is_held_though_a_few_small_days_are_in_the_history(tmp_path):
    days = days_from(FIRST, 28)
    small = {days[i] for i in SMALL}
    env = generated_env(tmp_path, days, orders=lambda day, rng: 12 if day in small else rng.randint(19, 21))
    assert run_chain(env.defs, env.instance, env.platform, days, lane="backfill").certified == days
    truncated = days_from(FIRST, 29)[-1]
    land(env, truncated, day_rows(truncated, 10, 9000))
    assert run_chain(env.defs, env.instance, env.platform, [truncated], lane="current").certified == []
    status = partition_status(env.platform, truncated)
    assert status.state == "ANOMALY_HELD" and "orders 10:" in status.detail, status.detail


def test_a_usual_day_after_the_same_history_certifies(tmp_path):
    days = days_from(FIRST, 28)
    small = {days[i] for i in SMALL}
    env = generated_env(tmp_path, days, orders=lambda day, rng: 12 if day in small else rng.randint(19, 21))
    assert run_chain(env.defs, env.instance, env.platform, days, lane="backfill").certified == days
    usual = days_from(FIRST, 29)[-1]
    land(env, usual, day_rows(usual, 18, 9000))
    assert run_chain(env.defs, env.instance, env.platform, [usual], lane="current").certified == [usual]


def test_a_day_its_owner_approved_as_an_anomaly_is_left_out_of_the_band(tmp_path, capsys):
    """An approved day stays out of the history: the next day like it is held again, not measured against it.

    Counted as history, the approved cents day (x100) would be the highest day, and a second cents day
    would be no extreme jump above it.
    """
    env = Env(tmp_path)
    for day in SAMPLE_DAYS:
        assert run_chain(env.defs, env.instance, env.platform, [day], lane="backfill").certified == [day]
    land(env, NEXT_DAY, day_rows(NEXT_DAY, 3, 209, scale=100))  # numbering on from the sample's 208: no gap
    assert run_chain(env.defs, env.instance, env.platform, [NEXT_DAY], lane="current").certified == []
    code, out = cli(env, capsys, "anomaly", "approve", "--day", NEXT_DAY, "--owner", OWNER, "--by",
                    "dana@atlasmart.example", "--reason", "store opening: real sales")
    assert code == 0, out
    assert partition_status(env.platform, NEXT_DAY).state == "CERTIFIED"  # served, and signed as an anomaly

    after = "2026-09-23"
    land(env, after, day_rows(after, 3, 212, scale=100))
    assert run_chain(env.defs, env.instance, env.platform, [after], lane="current").certified == []
    status = partition_status(env.platform, after)
    assert status.state == "ANOMALY_HELD" and "extreme jump" in status.detail, status.detail
    assert "against all 5 days certified so far" in status.detail, status.detail  # the sample, not the approved day
