"""Metrics scraped from the endpoint, JSON logs per partition, and no PII in anything a drill writes."""

import json
import urllib.request
from datetime import UTC, date, datetime, timedelta

import dagster as dg
import pytest
from prometheus_client import start_http_server
from prometheus_client.parser import text_string_to_metric_families

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.defs.partitions import daily_partitions
from atlasmart_dagster.drills.faults import INJECT_TRANSIENT_TAG, transient_faults_by_tag
from atlasmart_dagster.ops.observability.logs import read_log
from atlasmart_dagster.ops.observability.prometheus import registry_for
from atlasmart_dagster.ops.runs.chains import run_chain, run_reference
from atlasmart_dagster.product.serving import partition_status
from atlasmart_dagster.store.tables import CERTIFIED_ASSETS
from atlasmart_dagster_tests.environment import SAMPLE_DAYS
from atlasmart_dagster_tests.product.test_anomaly_guard import NEXT_DAY, OWNER, day_rows, land
from atlasmart_dagster_tests.product.test_batch_lifecycle import doubled, resend

PII = ["Avery Synthetic", "Blake Synthetic", "Casey Synthetic", "Devon Synthetic", "Emery Synthetic",
       "avery@example.invalid", "blake@example.invalid", "casey@example.invalid", "devon@example.invalid",
       "emery@example.invalid"]


def scrape(platform) -> dict[tuple[str, tuple], float]:
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry_for(platform))
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10).read().decode()
    finally:
        server.shutdown()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_endpoint_after_the_demo(env, capsys):
    assert main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", "demo"]) == 0
    capsys.readouterr()
    with transient_faults_by_tag():
        run_chain(env.defs, env.instance, env.platform, ["2026-09-20"], lane="backfill",
                  tags={INJECT_TRANSIENT_TAG: "agg_daily_sales"})
    m = scrape(env.platform)
    assert m[("atlasmart_records_processed_total", (("layer", "staging"),))] == 13 + 3
    assert m[("atlasmart_records_quarantined_total", (("layer", "staging"),))] == 3
    for asset in ("metric_gross_revenue", "mart_finance_daily_sales", "mart_executive_revenue"):
        assert m[("atlasmart_certified_partitions", (("asset", asset),))] == 5
        assert m[("atlasmart_last_certified_timestamp_seconds", (("asset", asset),))] > 1.7e9
    assert m[("atlasmart_open_incidents", ())] == 0
    assert m[("atlasmart_schema_drift_detections_total", ())] == 0
    assert m[("atlasmart_step_retries_total", (("asset", "agg_daily_sales"),))] == 1
    assert m[("atlasmart_slo_misses_total", (("objective", "availability"),))] == 0
    assert {k[1] for k in m if k[0] == "atlasmart_partition_load_duration_seconds"} == {
        (("partition", d),) for d in SAMPLE_DAYS}
    path = env.root / "atlasmart.prom"
    assert main(["--home", str(env.home), "metrics", "write", "--out", str(path)]) == 0
    assert "atlasmart_records_quarantined_total" in path.read_text()


def oldest_missing(samples: dict) -> dict[str, str]:
    """The oldest day not served per certified asset, as the exporter wrote it (midnight UTC, Unix time)."""
    return {asset: datetime.fromtimestamp(samples[("atlasmart_oldest_missing_day_timestamp_seconds", (("asset", asset),))],
                                          UTC).strftime("%Y-%m-%d %H:%M:%S")
            for asset in CERTIFIED_ASSETS}


def test_the_missing_day_is_exported_before_any_certification_and_a_backfill_of_old_days_leaves_the_new_one_missing(env):
    """The series of the missing-day alert exists on a home that never certified, and only serving a day moves it."""
    first, *old, new = SAMPLE_DAYS
    assert first == daily_partitions.get_first_partition_key()  # ATLASMART_FIRST_SALES_DATE, as the partitions read it
    m = scrape(env.platform)
    assert ("atlasmart_last_certified_timestamp_seconds", (("asset", CERTIFIED_ASSETS[0]),)) not in m
    assert oldest_missing(m) == dict.fromkeys(CERTIFIED_ASSETS, f"{first} 00:00:00")  # the first partition

    assert run_reference(env.defs, env.instance)
    outcome = run_chain(env.defs, env.instance, env.platform, [first, *old], lane="backfill")
    assert outcome.certified == [first, *old]
    m = scrape(env.platform)
    assert oldest_missing(m) == dict.fromkeys(CERTIFIED_ASSETS, f"{new} 00:00:00")
    # what the old rule read looks fresh: the backfill certified just now, while the new day is still missing
    assert all(m[("atlasmart_last_certified_timestamp_seconds", (("asset", a),))] > 1.7e9 for a in CERTIFIED_ASSETS)

    assert run_chain(env.defs, env.instance, env.platform, [new], lane="backfill").certified == [new]
    following = (date.fromisoformat(new) + timedelta(days=1)).isoformat()
    assert oldest_missing(scrape(env.platform)) == dict.fromkeys(CERTIFIED_ASSETS, f"{following} 00:00:00")


def held(samples: dict, reason: str) -> dict[str, float]:
    return {asset: samples[("atlasmart_partitions_held", (("asset", asset), ("reason", reason)))]
            for asset in CERTIFIED_ASSETS}


def test_days_held_for_the_data_owner_are_counted_per_product_and_reason_until_the_owner_decides(env, capsys):
    """A re-send beyond tolerance and a day sent in cents are held; the other certified days are not."""
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").certified == SAMPLE_DAYS
    none = dict.fromkeys(CERTIFIED_ASSETS, 0)
    m = scrape(env.platform)
    assert held(m, "restatement") == none and held(m, "anomaly") == none  # exported as 0: nothing held, not "no data"

    restated = "2026-09-19"
    resend(env, restated, change=doubled)
    land(env, NEXT_DAY, day_rows(NEXT_DAY, 3, 5000, scale=100))
    outcome = run_chain(env.defs, env.instance, env.platform, [restated, NEXT_DAY], lane="backfill")
    assert outcome.success and not {restated, NEXT_DAY} & set(outcome.certified)  # the range's other days certify again
    states = [partition_status(env.platform, d).state for d in (restated, NEXT_DAY)]
    assert states == ["RESTATEMENT_HELD", "ANOMALY_HELD"]
    m = scrape(env.platform)
    one = dict.fromkeys(CERTIFIED_ASSETS, 1)
    assert held(m, "restatement") == one and held(m, "anomaly") == one

    # The owner's decision ends the wait: a rejected anomaly is refused for good, an approved restatement certified.
    def owner(*decision: str) -> None:
        assert main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", *decision,
                     "--owner", OWNER, "--by", "dana@atlasmart.example", "--reason", "checked with the ERP"]) == 0
        capsys.readouterr()

    owner("anomaly", "reject", "--day", NEXT_DAY)
    m = scrape(env.platform)
    assert held(m, "restatement") == one and held(m, "anomaly") == none
    owner("restatement", "approve", "--day", restated)
    assert partition_status(env.platform, restated).state == "CERTIFIED"
    m = scrape(env.platform)
    assert held(m, "restatement") == none and held(m, "anomaly") == none


def test_one_json_log_line_per_partition_and_step(env):
    handler = {"class": "atlasmart_dagster.ops.observability.logs.JsonLinesHandler", "level": "INFO", "home": str(env.home)}
    with dg.instance_for_test(overrides={"python_logs": {"python_log_level": "INFO",
                                                         "dagster_handler_config": {"handlers": {"atlasmart_json": handler}}}}) as instance:
        outcome = run_chain(env.defs, instance, env.platform, SAMPLE_DAYS[:3], lane="backfill")
    lines = [l for l in read_log(env.platform.home) if l.get("event") == "partition_processed"]
    assets = {"raw_order_lines", "stg_order_lines", "fact_sales", "agg_daily_sales", "metric_gross_revenue",
              "mart_finance_daily_sales", "mart_executive_revenue"}
    assert {(l["asset"], l["partition"]) for l in lines} == {(a, d) for a in assets for d in SAMPLE_DAYS[:3]}
    for line in lines:
        assert line["run_id"] == outcome.run_id and line["lane"] == "backfill" and line["outcome"] in ("ok", "built")
        assert line["batch_ids"] and line["step"] and line["level"] == "INFO"
    staged = next(l for l in lines if l["asset"] == "stg_order_lines" and l["partition"] == "2026-09-18")
    assert (staged["raw_rows"], staged["accepted"], staged["quarantined"]) == (5, 4, 1)


@pytest.mark.slow
def test_no_drill_artifact_or_log_contains_pii(tmp_path, capsys):
    home = tmp_path / "home"
    for drill in ("failed-load", "source-late", "schema-drift", "semantic-bug", "anomaly-hold", "dr"):
        assert main(["--home", str(home), "drill", drill, "--workdir", str(tmp_path / drill)]) == 0, drill
    capsys.readouterr()
    scanned = 0
    for path in tmp_path.rglob("*"):
        if not path.is_file() or {"warehouse", "raw", "source"} & set(path.parts) or path.suffix in (".db", ".parquet"):
            # the ERP's input, the raw evidence and the customer table hold PII by design;
            # everything the platform writes *about* them may not
            continue
        if path.suffix not in (".json", ".jsonl", ".md", ".mmd", ".txt", ".log", ".prom"):
            continue
        text = path.read_text(errors="ignore")
        scanned += 1
        leaked = [p for p in PII if p in text]
        assert not leaked, (path, leaked)
    assert scanned > 20
    logs = list(tmp_path.rglob("runs.jsonl"))
    assert logs and all(json.loads(line) for log in logs for line in log.read_text().splitlines()[:5])
