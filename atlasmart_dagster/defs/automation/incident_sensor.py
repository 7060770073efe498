"""The incident sensor: incident response as the Dagster daemon runs it, once a minute.

The definition (name, interval, description the UI shows) is here, with the
other sensors; the work of a tick is operations' (``ops/response/incident_tick.py``)
and is handed in by ``definitions.py``, so ``defs/`` is the whole Dagster surface
and imports nothing above it.
"""

from collections.abc import Callable

import dagster as dg

from ...store.platform import Platform
from ..resources import AtlasmartResource, skips_when_clock_refused

IncidentTick = Callable[[dg.SensorEvaluationContext, Platform], dg.SkipReason]


def build_incident_sensor(tick: IncidentTick) -> dg.SensorDefinition:
    """The ``incident_sensor``, running ``tick`` on the home's platform (skipped on a refused clock)."""

    @dg.sensor(
        name="incident_sensor",
        minimum_interval_seconds=60,
        # On by default: an install that never hears of trouble (or never frees a dead run's lane) is not working.
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            "Opens or updates incidents from evidence: failed blocking checks and dashboard golden checks, missed "
            "SLOs (a day the daily delivery did not certify by its deadline records its availability miss here), "
            "failed runs of the certified chain, days still blocked upstream 10 minutes after their schedule, and "
            "raw evidence lost (a ledger-accepted batch missing from the raw store: restore from backup). "
            "Idempotent: each piece of evidence reaches exactly one incident. Shows each incident that changed on "
            "the assets and days it affects (their Events) and on the served assets' open_incidents check."
        ),
    )
    @skips_when_clock_refused
    def incident_sensor(context: dg.SensorEvaluationContext, atlasmart: AtlasmartResource):
        return tick(context, atlasmart.platform)

    return incident_sensor
