"""Prometheus metrics computed from the ledger at scrape time.

Counters come from append-only ledger tables, so they only ever grow; gauges
describe the state now. Served on 127.0.0.1 by ``atlasmart metrics serve`` and
written as a node-exporter textfile by ``atlasmart metrics write``.

===============================================  =======  ===============================================
metric                                           type     labels / meaning
===============================================  =======  ===============================================
atlasmart_records_processed_total                counter  rows through the quality gate, all builds
atlasmart_records_quarantined_total              counter  rows the gate quarantined, all builds
atlasmart_partition_load_duration_seconds        gauge    partition: run start -> end of its latest load
atlasmart_freshness_lag_seconds                  gauge    partition: ready -> certified at first delivery
atlasmart_last_certified_timestamp_seconds       gauge    asset: when it was last certified
atlasmart_oldest_missing_day_timestamp_seconds   gauge    asset: midnight UTC of the oldest day not served
atlasmart_certified_partitions                   gauge    asset: partitions consumers are served
atlasmart_slo_misses_total                       counter  objective: missed SLO evaluations
atlasmart_open_incidents                         gauge    incidents not resolved
atlasmart_schema_drift_detections_total          counter  failed source contract conformance checks
atlasmart_step_retries_total                     counter  asset: retried step attempts (ledger + spool)
atlasmart_partitions_held                        gauge    asset, reason: days waiting for the data owner
===============================================  =======  ===============================================

``atlasmart_partitions_held`` counts the days whose newest certification
decision is a hold only the data owner can lift: a re-send beyond tolerance
(``reason="restatement"``, ``atlasmart restatement approve``) or a day far from
its history (``reason="anomaly"``, ``atlasmart anomaly approve|reject``). It is
the rule ``atlasmart status`` reads (``RESTATEMENT_HELD`` / ``ANOMALY_HELD``),
per certified product; every asset and reason is exported, 0 included, so an
alert on it tells "nothing held" from "nothing scraped". The alert rules on
these metrics are ``deploy/prometheus/alerts.yml``.

``atlasmart_oldest_missing_day_timestamp_seconds`` is the oldest day, from the
first partition (``ATLASMART_FIRST_SALES_DATE``) on, that consumers of the
asset are not served: the first partition on a home that never certified
anything, the day after the newest one when none is missing. It is exported for
every certified asset from the first scrape on, and it only moves past a day
once that day is served, so certifying old days (a backfill) cannot hide a
newer missing one. The rule compares it with the schedule's deadline.

``atlasmart_step_retries_total`` counts the ledger's retries and those still
waiting in the home's spool (``Platform.step_retries``): a retry taken while the
ledger database was down is counted from the spool until a step writes it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Container
from datetime import UTC, date, datetime, timedelta
from typing import Iterator

from prometheus_client import CollectorRegistry, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ...defs.partitions import FIRST_SALES_DATE
from ...domain.check_names import SOURCE_CONTRACT_CONFORMS
from ...product.anomaly import ANOMALY_HELD
from ...product.restatements import RESTATEMENT_HELD
from ...product.slo import OBJECTIVES
from ...store.clock import parse_ts
from ...store.ledger.day_states import DayStates
from ...store.ledger.partition_states import BUILT, CERTIFICATION_REFUSED, CERTIFIED
from ...store.platform import Platform
from ...store.tables import CERTIFIED_ASSETS
from ...store.ledger.incidents import IncidentStore

# The label value of each hold the data owner decides, and how the gate's refusal reason starts.
OWNER_HOLDS = {"restatement": RESTATEMENT_HELD, "anomaly": ANOMALY_HELD}


class LedgerCollector(Collector):
    def __init__(self, platform: Platform):
        self.platform = platform

    def collect(self) -> Iterator[Metric]:
        ledger = self.platform.ledger
        # One read of the days this scrape reports on: staging's builds and the certified products.
        states = ledger.partitions.states(assets=["stg_order_lines", *CERTIFIED_ASSETS])
        staged = states.events((BUILT,), asset="stg_order_lines")
        processed = CounterMetricFamily("atlasmart_records_processed", "Rows through the quality gate (all builds).",
                                        labels=["layer"])
        processed.add_metric(["staging"], sum(e.detail.get("raw_rows", 0) for e in staged))
        yield processed
        quarantined = CounterMetricFamily("atlasmart_records_quarantined", "Rows quarantined by the quality gate.",
                                          labels=["layer"])
        quarantined.add_metric(["staging"], sum(e.detail.get("quarantined", 0) for e in staged))
        yield quarantined

        durations = GaugeMetricFamily("atlasmart_partition_load_duration_seconds",
                                      "Run start to run end of the latest load of each partition.", labels=["partition"])
        by_run: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
        for phase in ledger.runs.phases():
            by_run[(phase["partition"], phase["run_id"])].setdefault(phase["phase"], phase["at"])
            if phase["phase"] == "run_finished":
                by_run[(phase["partition"], phase["run_id"])]["run_finished"] = phase["at"]
        latest: dict[str, float] = {}
        for (partition, _), phases in by_run.items():
            if "run_started" in phases and "run_finished" in phases:
                latest[partition] = (parse_ts(phases["run_finished"]) - parse_ts(phases["run_started"])).total_seconds()
        for partition in sorted(latest):
            durations.add_metric([partition], latest[partition])
        yield durations

        slo = ledger.slos.records()
        freshness = GaugeMetricFamily("atlasmart_freshness_lag_seconds",
                                      "Manifest ready to certified, at the partition's first delivery.", labels=["partition"])
        for record in slo:
            if record["objective"] == "freshness" and record["value"] is not None:
                freshness.add_metric([record["partition"]], record["value"] * 60)
        yield freshness
        misses = CounterMetricFamily("atlasmart_slo_misses", "Missed SLO evaluations.", labels=["objective"])
        missed = Counter(r["objective"] for r in slo if not r["met"])
        for objective in OBJECTIVES:
            misses.add_metric([objective], missed.get(objective, 0))
        yield misses

        last = GaugeMetricFamily("atlasmart_last_certified_timestamp_seconds",
                                 "When each certified product was last certified (Unix time).", labels=["asset"])
        served = GaugeMetricFamily("atlasmart_certified_partitions", "Partitions consumers are served.", labels=["asset"])
        missing = GaugeMetricFamily("atlasmart_oldest_missing_day_timestamp_seconds",
                                    "Midnight UTC (Unix time) of the oldest day since the first partition that "
                                    "consumers are not served.", labels=["asset"])
        for asset in CERTIFIED_ASSETS:
            certs = states.events((CERTIFIED,), asset=asset)
            if certs:
                last.add_metric([asset], parse_ts(certs[-1].recorded_at).timestamp())
            served_days = states.served_map(asset)
            served.add_metric([asset], len(served_days))
            oldest = oldest_missing_day(served_days)
            missing.add_metric([asset], datetime(oldest.year, oldest.month, oldest.day, tzinfo=UTC).timestamp())
        yield last
        yield served
        yield missing

        yield GaugeMetricFamily("atlasmart_open_incidents", "Incidents not resolved.",
                                value=len(IncidentStore(ledger).open_incidents()))
        drift = sum(1 for r in ledger.checks.results() if r["check_name"] == SOURCE_CONTRACT_CONFORMS and not r["passed"])
        yield CounterMetricFamily("atlasmart_schema_drift_detections", "Batches stopped by the source contract gate.",
                                  value=drift)
        retries = CounterMetricFamily("atlasmart_step_retries", "Retried step attempts.", labels=["asset"])
        for asset, n in sorted(Counter(r["asset"] for r in self.platform.step_retries()).items()):
            retries.add_metric([asset], n)
        yield retries
        yield held_for_owner(states)


def oldest_missing_day(served: Container[str], first: str = FIRST_SALES_DATE) -> date:
    """The oldest day from ``first`` on that is not in ``served`` (partition keys, YYYY-MM-DD)."""
    day = date.fromisoformat(first)
    while day.isoformat() in served:
        day += timedelta(days=1)
    return day


def held_for_owner(states: DayStates) -> GaugeMetricFamily:
    """Days per certified asset whose newest certification decision is an owner's hold.

    The newest decision counts, as in ``product.restatements.held_reasons``: a
    day decided since (certified, or refused for another reason, such as the
    owner's rejection of an anomaly) is no longer waiting.
    """
    held: Counter[tuple[str, str]] = Counter()
    for asset in CERTIFIED_ASSETS:
        for day in states.of_asset(asset):
            decision = day.decisions[-1] if day.decisions else None
            if decision is None or decision.state != CERTIFICATION_REFUSED:
                continue
            reasons = decision.detail.get("reasons", [])
            kind = next((k for k, prefix in OWNER_HOLDS.items() if any(r.startswith(prefix) for r in reasons)), None)
            if kind:
                held[(asset, kind)] += 1
    family = GaugeMetricFamily("atlasmart_partitions_held", "Days whose certification waits for the data owner.",
                               labels=["asset", "reason"])
    for asset in CERTIFIED_ASSETS:
        for kind in OWNER_HOLDS:
            family.add_metric([asset, kind], held[(asset, kind)])
    return family


def registry_for(platform: Platform) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(platform))
    return registry


def write_textfile(platform: Platform, path: str) -> None:
    write_to_textfile(path, registry_for(platform))
