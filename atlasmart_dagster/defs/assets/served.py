"""Served layer: what consumers are served, per certified product and day, as Dagster partition status.

A certified product's own asset (e.g. ``mart_finance_daily_sales``) is green
for a day as soon as a run *built* it; a build is not a delivery. Each
certified product therefore has a ``served_<product>`` asset, declared here as
an external asset (nothing in Dagster materializes it). Its partition status
is kept equal to the ledger's served state:

* a day consumers are served a certified version (``CERTIFIED``, or
  ``RESTATEMENT_PENDING`` / ``RESTATEMENT_HELD`` while still serving vN) is
  **materialized**, with the served version, fingerprint, snapshot, when it was
  certified and by which run as the materialization's metadata; a new
  materialization is reported only when the served certification changes. It
  is recorded in the run that built the served version, when that run is in
  this instance (``dagster_event_adapter.py``), so the day's page names that
  run and its job in its header; otherwise (a migrated or restored home, a run
  on an ephemeral instance) it is runless and the header reads "Run None".
  The served checks name the materialization they judge, so they read against
  it (``defs/checks/said.py``);
* a day with nothing served (never certified, delayed, withdrawn with no
  earlier version) is **missing**: when certification is withdrawn its
  materializations are wiped (see ``sync_served_partitions``).

So the rule for users is one line: *to see what consumers get, look at the
``served_*`` assets* (the ``served`` group). ``sync_served_partitions`` is
called by every path that changes certification (the sensors, ``atlasmart``
commands, the incident workflow) and by ``certification_sensor`` on every tick
in which the ledger changed, which also brings a migrated or restored home's
served state into its Dagster instance.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import dagster as dg

from ...store.ledger.day_states import DayStates
from ...store.ledger.partition_states import ServedVersion
from ...store.platform import Platform
from ...store.tables import CERTIFIED_ASSETS
from ..dagster_event_adapter import report_materializations
from ..partitions import daily_partitions

SERVED_PREFIX = "served_"
SERVED_GROUP = "served"
# Metadata key that identifies the served certification of a materialization.
CERTIFICATION_ID = "certification_id"


def served_asset(product: str) -> str:
    """The served asset of a certified product: ``served_mart_finance_daily_sales``."""
    return f"{SERVED_PREFIX}{product}"


def product_of(served: str) -> str:
    """The certified product a served asset stands for: ``mart_finance_daily_sales``."""
    return served.removeprefix(SERVED_PREFIX)


SERVED_SPECS = [
    dg.AssetSpec(
        served_asset(product),
        deps=[product],
        partitions_def=daily_partitions,
        group_name=SERVED_GROUP,
        owners=["team:data-platform"],
        kinds={"iceberg"},
        description=(
            f"What consumers are served of {product}, per day. Materialized = a certified version is served "
            "(metadata: version, fingerprint, certified_at, certified_by_run); missing = nothing is served "
            "(not certified yet, delayed or withdrawn). Kept by AtlasMart from its certification ledger; "
            f"{product} itself turns green when a run builds a day, before certification. Its checks: "
            "certification_state (the headline: every due day served or not, each unserved day with why), "
            "open_incidents and, on the marts, the per-day SLOs of the delivery."
        ),
        metadata={"consumer_layer": "served", "serves": product},
    )
    for product in CERTIFIED_ASSETS
]
SERVED_ASSETS = tuple(spec.key.to_user_string() for spec in SERVED_SPECS)


def served_metadata(served: ServedVersion) -> dict:
    """The materialization metadata of a served day (text ids: the UI plots numbers).

    ``certified_by_run`` is a run entry, which the UI shows as a link to the
    run that built the served version (the run the day's header names, when
    this instance has it).
    """
    cert = served.certification
    return {
        "version": served.version,
        "fingerprint": dg.MetadataValue.text(cert.fingerprint or ""),
        "certified_at": dg.MetadataValue.text(served.certified_at),
        "certified_by_run": dg.MetadataValue.dagster_run(cert.run_id) if cert.run_id else dg.MetadataValue.text(""),
        "snapshot_id": dg.MetadataValue.text(str(cert.snapshot_id)),
        CERTIFICATION_ID: dg.MetadataValue.text(str(cert.id)),
    }


def _reported(instance: dg.DagsterInstance, asset: str, partitions: list[str]) -> dict[str, str]:
    """The certification id each partition's newest served materialization names (absent: nothing reported)."""
    key = dg.AssetKey(asset)
    materialized = instance.get_materialized_partitions(key)
    wanted = [p for p in partitions if p in materialized]
    reported: dict[str, str] = {}
    if not wanted:
        return reported
    cursor = None
    while True:  # newest first; the first record per partition is the one that counts
        result = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=wanted), limit=1000, cursor=cursor
        )
        for record in result.records:
            materialization = record.asset_materialization
            if materialization is None or materialization.partition in reported:
                continue
            entry = materialization.metadata.get(CERTIFICATION_ID)
            reported[materialization.partition] = entry.value if entry is not None else ""
        if not result.has_more or len(reported) == len(wanted):
            return reported
        cursor = result.cursor


def sync_served_partitions(
    instance: dg.DagsterInstance | None, platform: Platform, partitions: Iterable[str] | None = None,
    states: DayStates | None = None,
) -> dict[str, list[str]]:
    """Make the ``served_*`` assets' partition status equal to the ledger's served state.

    ``partitions`` limits the days looked at (None: every day the ledger or
    the instance knows for these assets). Idempotent: a day already showing
    its served certification gets no new event. A day that shows as served
    but is not any more (withdrawn with nothing older to serve) must turn
    missing; Dagster 1.13's SQL event logs cannot wipe single partitions
    (``wipe_asset_partitions`` raises NotImplementedError on SQLite and
    Postgres), so the served asset is wiped whole and every day still served
    is reported again (rare: only withdrawals do it). Returns what changed,
    per asset: days reported (``+day``) and days no longer served (``-day``).
    ``states``: the caller's fresh read of the products' days (read here when None).
    """
    changed: dict[str, list[str]] = {}
    if instance is None:
        return changed
    runs: dict[str, dg.DagsterRun | None] = {}
    reports: list[tuple[dg.DagsterRun | None, dg.AssetMaterialization]] = []
    defined = set(daily_partitions.get_partition_keys())  # one set, not a window computed per day and product
    if states is None:
        states = platform.ledger.partitions.states(None, CERTIFIED_ASSETS)  # one read for every product
    for product in CERTIFIED_ASSETS:
        asset = served_asset(product)
        key = dg.AssetKey(asset)
        served: Mapping[str, ServedVersion] = states.served_map(product)
        shown = instance.get_materialized_partitions(key)
        scope = set(served) | shown if partitions is None else set(partitions)
        gone = sorted(d for d in scope & shown if d not in served)
        if gone:
            instance.wipe_assets([key])
            changed[asset] = [f"-{d}" for d in gone]
            days, reported = sorted(served), {}
        else:
            days = sorted(d for d in scope if d in served)
            reported = _reported(instance, asset, days)
        for day in days:
            version = served[day]
            if day not in defined:
                continue  # outside the partitions the code location defines (older, or after the last)
            if reported.get(day) != str(version.certification.id):
                materialization = dg.AssetMaterialization(asset_key=key, partition=day, metadata=served_metadata(version))
                reports.append((_run_of(instance, version.certification.run_id, runs), materialization))
                changed.setdefault(asset, []).append(f"+{day}")
    # One batch for every served day that changed: a year certified at once is 1,095 of them.
    report_materializations(instance, reports)
    return changed


def _run_of(instance: dg.DagsterInstance, run_id: str | None, runs: dict[str, dg.DagsterRun | None]):
    """The run that built a served version, if this instance has it (None: the day is reported runless).

    ``runs`` caches the runs looked up across one sync.
    """
    if not run_id:
        return None
    if run_id not in runs:
        runs[run_id] = instance.get_run_by_id(run_id)
    return runs[run_id]
