"""One tick of incident response: detect, show in the UI, tell.

The Dagster sensor that runs it once a minute is ``defs/automation/incident_sensor.py``;
``definitions.py`` hands it this function, so the Dagster surface stays in ``defs/``
and this floor holds the work. Nothing here is Dagster-only: ``atlasmart tick`` and
the game-day runner call the same sensor.

Each tick also shows in the Dagster UI every incident that changed since the
instance last showed it (``incidents/ui_reporting.py``): an observation on each asset
and day it affects and the ``open_incidents`` check of the served assets.
The cursor is the newest incident event the last tick looked at: resolved
incidents with nothing newer are not looked at again, and a tick with
nothing new writes nothing.

This module is the one place incidents and notifications meet: ``notifications``
reads incidents to tell them, ``incidents`` never imports ``notifications``.
"""

import dagster as dg

from ...store.platform import Platform
from .incidents.detection import detect
from .incidents.ui_reporting import show_incidents_in_ui
from .notifications import deliver_pending


def incident_tick(context: dg.SensorEvaluationContext, platform: Platform) -> dg.SkipReason:
    """Detect new evidence, show changed incidents in the UI, then deliver what is due; says what it did."""
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
