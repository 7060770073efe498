"""The anomaly guard: days every rule accepts but their history does not are held for their owner.

Each case is a real run of the chain on a scratch home; the landing zone is
written the way the ERP writes it (truthful manifests, well-typed values).
"""

from __future__ import annotations

import json
import random
import re
import shutil
from datetime import date, datetime, timedelta, timezone

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.domain.controls import ControlTuple
from atlasmart_dagster.ops.response.incidents.detection import detect
from atlasmart_dagster.store.ledger.incidents import IncidentStore
from atlasmart_dagster.ops.response.incidents.notices import build_notice
from atlasmart_dagster.ops.runs.chains import run_chain
from atlasmart_dagster.product.anomaly import ANOMALY_HELD, PROFILE_KEY, judge, profile
from atlasmart_dagster.product.serving import partition_status, read_certified
from atlasmart_dagster.store.ledger.partition_states import CERTIFIED
from atlasmart_dagster.store.tables import METRIC_GROSS_REVENUE
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env
from atlasmart_dagster_tests.landing_batches import write_batch

NEXT_DAY = "2026-09-22"
FIRST = "2026-09-17"  # the first partition
OWNER = "erp-operations"
# A seasonal week (Monday first): quiet midweek, a busy weekend.
SEASON = (1.0, 0.9, 1.0, 1.1, 1.3, 1.7, 1.5)


def day_rows(day: str, orders: int, seq0: int, *, scale: int = 1, rng: random.Random | None = None,
             shifted: int = 0) -> list[dict]:
    """``orders`` one-line paid orders of ``day``; amounts times ``scale``; the first ``shifted`` lines'
    event time on the next UTC day (sales_date unchanged)."""
    rng = rng or random.Random(day)
    rows = []
    for i in range(orders):
        amount = rng.randint(2500, 3500)  # cents
        at = datetime.fromisoformat(day).replace(hour=9 + i % 12, tzinfo=timezone.utc)
        if i < shifted:
            at = at.replace(hour=1) + timedelta(days=1)
        rows.append({
            "source_seq": seq0 + i, "order_id": f"O{day.replace('-', '')}{i:03d}", "line_no": 1, "sales_date": day,
            "event_ts": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "customer_id": "C001", "product_id": "P100",
            "channel": "web", "quantity": 1,
            "line_amount_usd": f"{amount * scale / 100:.2f}", "line_cost_usd": f"{amount * scale * 0.6 / 100:.2f}",
            "status": "paid",
        })
    return rows


def land(env: Env, day: str, rows: list[dict], batch: int = 1) -> None:
    write_batch(env.day_dir(day), rows, batch_id=f"ERP-{day.replace('-', '')}-{batch:02d}",
                ready_at=f"{(date.fromisoformat(day) + timedelta(days=1)).isoformat()}T08:04:00Z")


def days_from(first: str, n: int) -> list[str]:
    start = date.fromisoformat(first)
    return [(start + timedelta(days=i)).isoformat() for i in range(n)]


def generated_env(tmp_path, days: list[str], orders=lambda day, rng: 10, seed: int = 1) -> Env:
    """A landing zone of generated days only (the sample's days removed), none loaded yet."""
    env = Env(tmp_path)
    for day in SAMPLE_DAYS:
        shutil.rmtree(env.day_dir(day))
    rng = random.Random(seed)
    for i, day in enumerate(days):
        land(env, day, day_rows(day, orders(day, rng), 1000 + 100 * i, rng=rng))
    return env


def cli(env: Env, capsys, *args) -> tuple[int, str]:
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", *args])
    return code, capsys.readouterr().out


@pytest.fixture
def sample(tmp_path) -> Env:
    """The five sample days certified (their own history), one run per day as the daily loads make them."""
    env = Env(tmp_path)
    for day in SAMPLE_DAYS:
        assert run_chain(env.defs, env.instance, env.platform, [day], lane="backfill").certified == [day]
    return env


def served_revenue(env: Env) -> dict[str, str]:
    table = read_certified(env.platform, METRIC_GROSS_REVENUE.name).to_pylist()
    found: dict[str, float] = {}
    for row in table:
        found[row["sales_date"].isoformat()] = found.get(row["sales_date"].isoformat(), 0) + float(row["value_usd"])
    return found


def test_a_day_sent_in_cents_is_held_and_every_other_day_keeps_serving(sample):
    before = served_revenue(sample)
    land(sample, NEXT_DAY, day_rows(NEXT_DAY, 3, 300, scale=100))
    outcome = run_chain(sample.defs, sample.instance, sample.platform, [NEXT_DAY], lane="current")
    assert outcome.success and outcome.certified == []
    status = partition_status(sample.platform, NEXT_DAY)
    assert status.state == "ANOMALY_HELD"
    assert "revenue_usd" in status.detail and "extreme jump" in status.detail, status.detail
    assert served_revenue(sample) == before  # nothing new served, the other days unchanged
    # Detection opens an incident in consumer words, with the figures.
    (incident_id,) = detect(sample.platform)
    incident = IncidentStore(sample.platform.ledger).get(incident_id)
    (held,) = [s for s in incident.signals if s["kind"] == "anomaly_held"]
    assert re.fullmatch(r"2026-09-22 \(Tuesday\) revenue is \d+ times the usual of recent certified days; held for the data owner",
                        held["summary"]), held["summary"]
    assert float(held["observed"]["revenue_usd"]) > 5000 and "median" in held["expected"]["revenue_usd"]


def test_a_truncated_day_is_held_against_a_steady_history(tmp_path):
    days = days_from(FIRST, 14)
    env = generated_env(tmp_path, days, orders=lambda day, rng: rng.randint(9, 11))
    assert run_chain(env.defs, env.instance, env.platform, days, lane="backfill").certified == days
    truncated = "2026-10-01"
    land(env, truncated, day_rows(truncated, 5, 5000))
    assert run_chain(env.defs, env.instance, env.platform, [truncated], lane="current").certified == []
    status = partition_status(env.platform, truncated)
    assert status.state == "ANOMALY_HELD" and "orders 5: 1/2 the median" in status.detail, status.detail
    assert "of 14 certified days (band" in status.detail


def test_event_times_shifted_to_the_next_day_are_held_though_sales_date_is_right(sample):
    land(sample, NEXT_DAY, day_rows(NEXT_DAY, 5, 300, shifted=4))
    assert run_chain(sample.defs, sample.instance, sample.platform, [NEXT_DAY], lane="current").certified == []
    status = partition_status(sample.platform, NEXT_DAY)
    assert status.state == "ANOMALY_HELD" and "event_day_drift_share 80%" in status.detail, status.detail


def test_a_day_like_the_others_certifies_and_records_its_profile(sample):
    land(sample, NEXT_DAY, day_rows(NEXT_DAY, 2, 209))  # numbered on from the sample's 208: no gap
    assert run_chain(sample.defs, sample.instance, sample.platform, [NEXT_DAY], lane="current").certified == [NEXT_DAY]
    certification = sample.platform.ledger.partitions.served(METRIC_GROSS_REVENUE.name, NEXT_DAY).certification
    assert certification.detail[PROFILE_KEY]["event_day_drift_share"] == 0.0
    assert certification.detail[PROFILE_KEY]["paid_lines"] == 2.0
    # five days of history are fewer than a week: said, and certified
    assert any("too little certified history" in n for n in certification.detail["notes"])


def test_too_little_history_certifies_a_halved_day_but_holds_an_extreme_jump(tmp_path):
    days = days_from(FIRST, 2)
    env = generated_env(tmp_path, days)
    assert run_chain(env.defs, env.instance, env.platform, days, lane="backfill").certified == days
    land(env, "2026-09-19", day_rows("2026-09-19", 5, 3000))  # half a usual day: no band yet
    assert run_chain(env.defs, env.instance, env.platform, ["2026-09-19"], lane="current").certified == ["2026-09-19"]
    land(env, "2026-09-20", day_rows("2026-09-20", 10, 4000, scale=100))
    assert run_chain(env.defs, env.instance, env.platform, ["2026-09-20"], lane="current").certified == []
    assert partition_status(env.platform, "2026-09-20").state == "ANOMALY_HELD"


def test_a_cents_day_inside_a_range_backfill_is_held_and_its_neighbours_certify(tmp_path):
    days = days_from(FIRST, 21)
    env = generated_env(tmp_path, days, orders=lambda day, rng: rng.randint(8, 12))
    land(env, "2026-09-26", day_rows("2026-09-26", 10, 1900, scale=100))
    outcome = run_chain(env.defs, env.instance, env.platform, days, lane="backfill")
    assert outcome.certified == [d for d in days if d != "2026-09-26"]
    assert partition_status(env.platform, "2026-09-26").state == "ANOMALY_HELD"


def test_a_seasonal_month_with_noise_certifies_without_a_single_hold(tmp_path):
    """Weekly seasonality (weekend 1.7x) and +-20 % noise: one range run, every day certified."""
    days = days_from(FIRST, 35)
    env = generated_env(
        tmp_path, days, seed=7,
        orders=lambda day, rng: round(20 * SEASON[date.fromisoformat(day).weekday()] * rng.uniform(0.8, 1.2)),
    )
    outcome = run_chain(env.defs, env.instance, env.platform, days, lane="backfill")
    assert outcome.certified == days, [d.reasons for d in outcome.decisions if not d.certified][:3]


@pytest.mark.parametrize("seed", range(6))
def test_daily_loads_of_a_seasonal_month_never_hold(env, seed):
    """The same month judged day after day, as daily loads see it (history grows by one day each time)."""
    rng = random.Random(seed)
    ledger = env.platform.ledger
    at = datetime(2026, 10, 1, tzinfo=timezone.utc)
    for day in days_from(FIRST, 35):
        lines = round(20 * SEASON[date.fromisoformat(day).weekday()] * rng.uniform(0.8, 1.2))
        revenue = sum(rng.randint(2500, 3500) for _ in range(lines)) / 100
        controls = ControlTuple(lines, lines, lines, revenue, revenue * 0.6, revenue * 0.4)
        found = profile(controls, {"rows": lines, "accepted": lines, "reasons": {}}, 0)
        verdict = judge(env.platform, {day: found})[day]
        assert not verdict.held, (day, verdict.reason())
        ledger.partitions.append(METRIC_GROSS_REVENUE.name, day, CERTIFIED, at, actor="test", controls=controls,
                                 detail={PROFILE_KEY: found})


def test_the_owner_approves_held_figures_or_rejects_them(sample, capsys):
    land(sample, NEXT_DAY, day_rows(NEXT_DAY, 3, 300, scale=100))
    run_chain(sample.defs, sample.instance, sample.platform, [NEXT_DAY], lane="current")
    # Only the contract's owner decides, naming a person and a reason.
    code, _ = cli(sample, capsys, "anomaly", "approve", "--day", NEXT_DAY, "--owner", "someone-else", "--by", "x",
                  "--reason", "y")
    assert code != 0
    code, out = cli(sample, capsys, "anomaly", "approve", "--day", NEXT_DAY, "--owner", OWNER, "--by",
                    "dana@atlasmart.example", "--reason", "store opening: real sales", "--json")
    assert code == 0, out
    held = sample.platform.ledger.partitions.events(partition=NEXT_DAY, states=("CERTIFICATION_REFUSED",))[-1]
    assert json.loads(out)["approved_controls"] == held.controls.to_json()  # exactly the held figures
    status = partition_status(sample.platform, NEXT_DAY)
    assert status.state == "CERTIFIED" and status.certified_version == 1


def test_a_rejected_day_serves_nothing_and_a_corrected_delivery_certifies(sample, capsys):
    land(sample, NEXT_DAY, day_rows(NEXT_DAY, 3, 300, scale=100))
    run_chain(sample.defs, sample.instance, sample.platform, [NEXT_DAY], lane="current")
    code, out = cli(sample, capsys, "anomaly", "reject", "--day", NEXT_DAY, "--owner", OWNER, "--by",
                    "dana@atlasmart.example", "--reason", "sent in cents", "--json")
    assert code == 0 and json.loads(out)["retired_batches"] == ["ERP-20260922-01"]
    status = partition_status(sample.platform, NEXT_DAY)
    assert status.state == "DELAYED" and "rejected" in status.detail and "corrected delivery" in status.detail
    assert sample.platform.raw_store.batches(NEXT_DAY)  # the rejected bytes stay as evidence
    land(sample, NEXT_DAY, day_rows(NEXT_DAY, 3, 209), batch=2)  # the re-send numbers on from 208: no gap
    assert run_chain(sample.defs, sample.instance, sample.platform, [NEXT_DAY], lane="current").certified == [NEXT_DAY]


def test_the_notice_says_what_consumers_keep_in_their_words(sample):
    land(sample, NEXT_DAY, day_rows(NEXT_DAY, 3, 300, scale=100))
    run_chain(sample.defs, sample.instance, sample.platform, [NEXT_DAY], lane="current")
    (incident_id,) = detect(sample.platform)
    incident = IncidentStore(sample.platform.ledger).get(incident_id)
    notice = build_notice(sample.platform, incident, stage="initial", summary="A day is being checked.",
                          repair="The data owner decides.", next_update="in one hour", restated=False)
    text = json.dumps(notice)
    assert "times the usual of recent certified days" in text and "held for the data owner" in text
    assert ANOMALY_HELD not in text and "ANOMALY_HELD" not in text and "revenue_usd" not in text
