"""A one-step job on the project's own executor choice, for the Celery worker tests.

Imported by the test (the run side) and by the worker that executes its step,
both with ``ATLASMART_EXECUTOR=celery`` and the broker in
``ATLASMART_CELERY_BROKER``, so the step goes through the broker exactly as
the chain's steps do in a team deployment.
"""

import os
import socket

import dagster as dg

from atlasmart_dagster.definitions import chosen_executor


@dg.op
def where_it_ran() -> str:
    """The host and pid of the process that executed the step."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dg.job(executor_def=chosen_executor())
def celery_probe_job():
    where_it_ran()
