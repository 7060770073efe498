"""The incident sensor: detection as the Dagster daemon runs it, once a minute.

It lives with the incident workflow rather than with the loading sensors in
``defs/automation/``: it acts on evidence the platform recorded, and opening
an incident is operations, not loading.
"""

import dagster as dg

from ...defs.resources import AtlasmartResource
from .detection import detect


@dg.sensor(
    name="incident_sensor",
    minimum_interval_seconds=60,
    # On by default: an install that never hears of trouble (or never frees a dead run's lane) is not working.
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Opens or updates incidents from evidence: failed blocking checks and dashboard golden checks, missed "
        "SLOs (a day the daily delivery did not certify by its deadline records its availability miss here), "
        "failed runs of the certified chain, and days still blocked upstream 10 minutes after their schedule. "
        "Idempotent: each piece of evidence reaches exactly one incident."
    ),
)
def incident_sensor(context: dg.SensorEvaluationContext, atlasmart: AtlasmartResource):
    touched = detect(atlasmart.platform, context.instance)
    if not touched:
        return dg.SkipReason("no new evidence of trouble")
    context.log.warning(f"incidents opened or updated: {', '.join(touched)}")
    return dg.SkipReason(f"incidents opened or updated: {', '.join(touched)} (see atlasmart incident list)")
