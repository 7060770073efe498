"""The daily schedule: at 08:00 UTC, run the previous business day in the current lane."""


from datetime import timedelta

import dagster as dg

from ...product.lanes import CURRENT, LANE_TAG
from .jobs import daily_sales_job

TRIGGER_TAG = "atlasmart/trigger"


@dg.schedule(
    cron_schedule="0 8 * * *",
    execution_timezone="UTC",
    job=daily_sales_job,
    name="daily_sales_schedule",
    description=(
        "08:00 UTC: load yesterday's partition. If the ERP manifest is not ready yet, the run records "
        "BLOCKED_UPSTREAM and publishes nothing; landing_manifest_sensor starts the load when it lands."
    ),
)
def daily_sales_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    partition = (context.scheduled_execution_time - timedelta(days=1)).date().isoformat()
    return dg.RunRequest(
        run_key=f"schedule-{partition}",
        partition_key=partition,
        tags={LANE_TAG: CURRENT, TRIGGER_TAG: "schedule"},
    )
