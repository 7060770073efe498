"""Jobs: the daily chain, the same chain in the backfill lane, dashboard cross-checks, reference data.

``daily_sales_job`` carries no lane tag on purpose: Dagster copies a job's tags
onto every run the job makes, including the runs of a backfill launched from
the job's page, and those must count in the backfill lane. The schedule and
the sensors tag their requests; an untagged run's lane is derived from what it
is (``product/lanes.py``).
"""

from __future__ import annotations

import dagster as dg

from ...product.lanes import BACKFILL, LANE_TAG
from ..assets.asset_args import CHAIN_TAG, DAILY
from ..checks.golden_checks import GOLDEN_CHECK_KEYS

# What started a run of the chain: "schedule", "landing_manifest_sensor" (automation), or absent (an operator).
TRIGGER_TAG = "atlasmart/trigger"

# The chain with its checks: every asset of a day-partitioned table (store/tables.py's
# registry; defs/assets/asset_args.py tags them), so a new mart is in the jobs
# without another list. SLO results and certification state are known only
# after certification; their checks sit on the served_* assets, outside the chain.
daily_sales_chain = dg.AssetSelection.tag(CHAIN_TAG, DAILY)

daily_sales_job = dg.define_asset_job(
    "daily_sales_job",
    selection=daily_sales_chain,
    description=(
        "Load business days end to end: raw -> staging -> fact -> agg -> metric -> marts. The schedule and "
        "landing_manifest_sensor run the current day in the current lane; a backfill launched from this page runs "
        "in the backfill lane (and refuses the current day unless tagged atlasmart/include_current=true)."
    ),
)

backfill_sales_job = dg.define_asset_job(
    "backfill_sales_job",
    selection=daily_sales_chain,
    description=(
        "Rebuild a range of historical days in the backfill lane (one run for the whole range). "
        "Refuses the current day unless tagged atlasmart/include_current=true."
    ),
    tags={LANE_TAG: BACKFILL},
)

dashboard_checks_job = dg.define_asset_job(
    "dashboard_checks_job",
    selection=dg.AssetSelection.checks(*GOLDEN_CHECK_KEYS),
    description=(
        "Golden cross-checks of the dashboards against the governed metric, on the certified consumer layer. "
        "Started by certification_sensor after each certification; passing days certify the dashboards."
    ),
)

reference_job = dg.define_asset_job(
    "reference_job",
    selection=dg.AssetSelection.assets("dim_customer", "dim_product"),
    description="Reload the customer and product dimensions from the reference extracts.",
)
