"""The ``open_incidents`` check of every served asset (WARN, never blocking).

The definition is here, with the other checks; what it says is incident
response's (``ops/response/incidents/ui_reporting.py`` reports it whenever an
incident or a served day changes, and hands ``definitions.py`` the evaluation
that *Execute all* runs), so ``defs/`` is the whole Dagster surface and imports
nothing above it.
"""

from collections.abc import Callable, Sequence

import dagster as dg

from ...store.platform import Platform
from ...store.tables import CERTIFIED_ASSETS
from ..assets.served import served_asset
from ..assets.step import run_wide_check_events
from ..resources import AtlasmartResource

OPEN_INCIDENTS = "open_incidents"

OPEN_INCIDENTS_SPECS = [
    dg.AssetCheckSpec(
        OPEN_INCIDENTS,
        asset=served_asset(product),
        description=(
            "Fails (WARN) while an incident affecting this product is open: each one with its status and days, "
            "what consumers are served now and the latest consumer notice. Passes once every incident on it is "
            "resolved. Reported by AtlasMart when an incident opens or changes; never blocking. Each affected "
            "asset's Events tab has the incident's observations, day by day."
        ),
        blocking=False,
    )
    for product in CERTIFIED_ASSETS
]
OUTPUT_NAMES = {spec.key: spec.get_python_identifier() for spec in OPEN_INCIDENTS_SPECS}

OpenIncidentsEvaluation = Callable[[Platform, Sequence[str]], Sequence[dg.AssetCheckEvaluation]]


def build_open_incidents_checks(evaluate: OpenIncidentsEvaluation) -> dg.AssetChecksDefinition:
    """The executable ``open_incidents`` checks, each selected served asset evaluated by ``evaluate``."""

    @dg.multi_asset_check(
        specs=OPEN_INCIDENTS_SPECS,
        name="open_incidents_checks",
        can_subset=True,
        description="Whether an incident affecting each certified product is open (WARN, never blocking).",
    )
    def open_incidents_checks(context: dg.AssetCheckExecutionContext, atlasmart: AtlasmartResource):
        """Executed from the UI: each selected served asset's open incidents, from the ledger, as things stand."""
        keys = sorted(context.selected_asset_check_keys, key=lambda k: k.asset_key.to_user_string())
        evaluations = evaluate(atlasmart.platform, [k.asset_key.to_user_string() for k in keys])
        # One evaluation states the whole asset, written for each day of a partitioned run (step.py says why).
        yield from run_wide_check_events(context, OUTPUT_NAMES, evaluations)

    return open_incidents_checks
