"""The incident sensor: detection as the Dagster daemon runs it, once a minute.

It lives with the incident workflow rather than with the loading sensors in
``defs/automation/``: it acts on evidence the platform recorded, and opening
an incident is operations, not loading.

Each tick also shows in the Dagster UI every incident that changed since the
instance last showed it (``ui_reporting.py``): an observation on each asset
and day it affects and the ``open_incidents`` check of the served assets.
The cursor is the newest incident event the last tick looked at: resolved
incidents with nothing newer are not looked at again, and a tick with
nothing new writes nothing.
"""

import dagster as dg

from ...defs.resources import AtlasmartResource, skips_when_clock_refused
from ..notifications import deliver_pending
from .detection import detect
from .ui_reporting import show_incidents_in_ui


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
    platform = atlasmart.platform
    touched = detect(platform, context.instance)
    after = int(context.cursor) if context.cursor else None
    shown = show_incidents_in_ui(context.instance, platform, after_event_id=after)
    if shown.last_event_id != after:
        context.update_cursor(str(shown.last_event_id))
    in_ui = (f"; shown in the UI: {', '.join(shown.incidents)} (the served assets' open_incidents check, each "
             "affected asset's Events)" if shown.incidents else "")
    # After detection, so an incident opened on this tick is told on this tick. Never raises: a dead
    # channel is recorded and retried on later ticks, and costs one timeout per tick at most.
    delivered = deliver_pending(platform, graph=context.repository_def.asset_graph if context.repository_def else None,
                                instance=context.instance)
    if delivered.sent or delivered.failed or delivered.gave_up or delivered.problem:
        context.log.info(f"notifications: {delivered.line()}")
    if not touched:
        return dg.SkipReason(f"no new evidence of trouble{in_ui}")
    context.log.warning(f"incidents opened or updated: {', '.join(touched)}")
    return dg.SkipReason(f"incidents opened or updated: {', '.join(touched)} (see atlasmart incident list){in_ui}")
