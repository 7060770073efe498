"""Operating the product, one room per concern: ``runs`` (launching, queueing, backfills, workers),
``response`` (incidents and notifications), ``recovery`` (backup, restore, verify, rollback, migration,
maintenance) and ``observability`` (logs and metrics); ``gameday`` runs the automation by hand on a logical
clock. The Dagster definitions they serve live in ``defs/``."""
