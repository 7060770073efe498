"""The code location the incident UI test serves: the project's, with the ``open_incidents`` check.

Dagster lists a check only where a Definitions object has it; until
``definitions.py`` lists it in ``ASSET_CHECKS``, this location adds it.
"""

import dagster as dg

from atlasmart_dagster import definitions
from atlasmart_dagster.ops.incidents.ui_reporting import open_incidents_checks

defs = (definitions.defs if open_incidents_checks in definitions.ASSET_CHECKS
        else dg.Definitions.merge(definitions.defs, dg.Definitions(asset_checks=[open_incidents_checks])))
