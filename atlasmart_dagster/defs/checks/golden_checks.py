"""Golden cross-checks on dashboards: every governed figure a dashboard shows equals the governed metric.

Pipeline checks prove the data product reconciles with itself; they cannot see
a dashboard that computes "revenue" its own way. This check recomputes each
tile that presents a governed metric (flagged with it, or saying revenue
without the flag: ``Tile.presents_governed_metric``) from the certified
consumer layer and compares it with the governed metric per day and in total.
"""

import dagster as dg

from ...domain.check_names import GOLDEN_MATCHES_GOVERNED_METRIC
from ...product.dashboards import DEFAULT_DASHBOARDS, certified_connection, current, governed_values, tile_values
from ..assets.step import CheckOutcome, Step
from ..resources import AtlasmartResource

GOLDEN_SPECS = [
    dg.AssetCheckSpec(
        GOLDEN_MATCHES_GOVERNED_METRIC,
        asset=asset,
        description=(
            "Every tile that presents a governed metric (flagged, or a revenue tile without the flag) equals the "
            "governed metric, per day and in total."
        ),
    )
    for asset in DEFAULT_DASHBOARDS
]
GOLDEN_CHECK_KEYS = [spec.key for spec in GOLDEN_SPECS]


def golden_outcomes(step: Step) -> list[CheckOutcome]:
    platform = step.platform
    outcomes = []
    with certified_connection(platform) as con:  # certified relations registered once for every dashboard
        governed = governed_values(platform, con=con)
        for asset in DEFAULT_DASHBOARDS:
            dashboard = current(platform.ledger, asset)
            values = tile_values(platform, dashboard, con)
            outcome = CheckOutcome(asset, GOLDEN_MATCHES_GOVERNED_METRIC, False,
                                   f"governed tiles of {dashboard.title} v{dashboard.version} = governed metric")
            claimed = dashboard.governed_tiles
            for day in sorted(governed):
                shown = {t.key: format(values[t.key].get(day, 0), "f") for t in claimed}
                ok = all(values[t.key].get(day) == governed[day] for t in claimed)
                outcome.add(day, ok, {"dashboard_version": dashboard.version, **shown},
                            {"governed_metric": format(governed[day], "f")})
            outcome.summary = {
                "total_observed": {t.key: format(sum(values[t.key].values()), "f") for t in claimed},
                "total_governed": format(sum(governed.values()), "f"),
            }
            outcomes.append(outcome)
    return outcomes


@dg.multi_asset_check(specs=GOLDEN_SPECS, name="dashboard_golden_checks")
def dashboard_golden_checks(context: dg.AssetCheckExecutionContext, atlasmart: AtlasmartResource):
    step = Step(context, atlasmart, "dashboards")
    for result in step.record_checks(golden_outcomes(step)):
        yield result
