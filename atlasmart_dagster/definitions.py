"""The code location: every asset, check, job, schedule and sensor, composed once.

Global choices live here and nowhere else:

* the **in-process executor**: every asset is set-based SQL in DuckDB, which
  already uses both cores; a process per step would add ~10 s of start-up to
  every run (measured: ~3.5 s vs ~20 s for ``dagster asset materialize``);
  in the team deployment, ``ATLASMART_EXECUTOR=celery`` puts the steps on
  Celery workers instead (dagster-celery, broker ``ATLASMART_CELERY_BROKER``),
  so the runs the daemon launches spread over worker machines;
* one ``atlasmart`` resource, configured from the environment at run time.

The assets are every asset and asset spec of the ``defs/assets`` package,
found by Dagster's package loader: a new mart's module is loaded without a
list to edit here.
"""

from __future__ import annotations

import os
from typing import Sequence

import dagster as dg

# Dagster stores a step's materializations of a range in batches only when
# DAGSTER_EVENT_BATCH_SIZE is set, and reads it in the process that runs the
# step, which imports this module: set here (not only in deploy/Dockerfile) so
# every shell, the daemon's run workers and the Celery workers batch by
# default. Postgres writes a batch in one statement; the embedded event log in
# one transaction per shard (store/instance/dagster_sqlite_adapter.py). An explicit
# value, 0 included, wins.
EVENT_BATCH_SIZE_ENV = "DAGSTER_EVENT_BATCH_SIZE"
os.environ.setdefault(EVENT_BATCH_SIZE_ENV, "100")

# A code server started with `&` by a non-interactive shell ignored SIGTERM
# (and SIGINT) until SIGKILL: see defs/dagster_interrupts_adapter.py.
from .defs import dagster_interrupts_adapter

dagster_interrupts_adapter.install()

from .defs.assets import package_assets
from .defs.automation.jobs import backfill_sales_job, daily_sales_job, dashboard_checks_job, reference_job
from .defs.automation.schedules import daily_sales_schedule
from .defs.automation.certification_sensor import certification_sensor
from .defs.automation.sensors import landing_manifest_sensor
from .defs.checks.certification_checks import certification_states
from .defs.checks.golden_checks import dashboard_golden_checks
from .defs.checks.slo_checks import partition_slos
from .defs.automation.incident_sensor import build_incident_sensor
from .defs.automation.run_reaper import stale_run_sensor
from .defs.checks.open_incidents import build_open_incidents_checks
from .defs.resources import AtlasmartResource
from .ops.response.incident_tick import incident_tick
from .ops.response.incidents.ui_reporting import evaluate_open_incidents
from .settings import Settings, current

# The two definitions whose work is incident response's: defs/ defines them, ops/ hands in the work.
incident_sensor = build_incident_sensor(incident_tick)
open_incidents_checks = build_open_incidents_checks(evaluate_open_incidents)

ASSETS = package_assets()
ASSET_CHECKS = [
    partition_slos,
    certification_states,
    dashboard_golden_checks,
    open_incidents_checks,
]


EXECUTOR_ENV = Settings.executor.name
BROKER_ENV = Settings.celery_broker.name  # read by dagster-celery itself, from the environment only
# The broker queue the steps go to (workers take it with `-q`): one per
# deployment, so two deployments sharing a broker never run each other's steps.
QUEUE_ENV = Settings.celery_queue.name


# A step is acknowledged when it has finished, not when a worker takes it, and
# a worker that dies mid-step hands it back: the broker then gives it to
# another worker (RabbitMQ at once; Redis after its visibility timeout), which
# runs it again from the start. Steps can be re-run safely: a partition is
# replaced in one Iceberg commit or not at all. One step per worker at a time,
# so a dying worker holds no queue of prefetched steps.
CELERY_DELIVERY = {"task_acks_late": True, "task_reject_on_worker_lost": True, "worker_prefetch_multiplier": 1}


def chosen_executor() -> dg.ExecutorDefinition:
    """In-process (the default), or dagster-celery's executor when ``ATLASMART_EXECUTOR=celery``."""
    chosen = current()
    if chosen.executor == "in_process":  # neither in_process nor celery: UsageError
        return dg.in_process_executor
    # Imported only here: dagster-celery comes with the `team` extra.
    from dagster_celery import celery_executor

    # The same broker, backend and delivery settings as the workers' deploy/celery.yaml.
    return celery_executor.configured(
        {
            "broker": {"env": BROKER_ENV},
            "backend": "rpc://",
            "include": ["atlasmart_dagster.definitions"],
            "config_source": {**CELERY_DELIVERY, "task_default_queue": chosen.celery_queue},
        },
        name="celery",
    )


def build_definitions(
    atlasmart: AtlasmartResource | None = None, extra_assets: Sequence[dg.AssetsDefinition] = ()
) -> dg.Definitions:
    """The Definitions object; tests and drills pass a resource bound to a scratch home.

    ``extra_assets`` are assets defined outside the package (a test's toy mart).
    """
    return dg.Definitions(
        assets=[*ASSETS, *extra_assets],
        asset_checks=ASSET_CHECKS,
        jobs=[daily_sales_job, backfill_sales_job, dashboard_checks_job, reference_job],
        schedules=[daily_sales_schedule],
        sensors=[landing_manifest_sensor, certification_sensor, incident_sensor, stale_run_sensor],
        resources={"atlasmart": atlasmart or AtlasmartResource()},
        executor=chosen_executor(),
    )


defs = build_definitions()
