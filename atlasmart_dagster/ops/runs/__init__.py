"""Running the chain: in-process chains and checks (``chains``), the run queue and its lanes, backfills,
and the Celery worker."""
