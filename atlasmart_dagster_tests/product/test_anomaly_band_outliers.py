"""The anomaly band is robust to a minority of small days in its history (issue 35, finding 6).

Real histories have holidays and partial days. A few of them among the 28
certified days dragged the band's low end (10th percentile / 1.75) so far
down that a day truncated to half passed; the same weekday's median now
bounds the low end too, and a day its owner approved as an anomaly is no
measure of a usual day.
"""

from atlasmart_dagster.ops.runs import run_chain
from atlasmart_dagster.product.serving import partition_status

from .test_anomaly_guard import FIRST, days_from, day_rows, generated_env, land

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
