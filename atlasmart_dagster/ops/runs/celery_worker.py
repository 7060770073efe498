"""Start a team's Celery worker with the broker URL kept in the environment: nothing secret is written to disk.

Usage (deploy/README.md)::

    python -m atlasmart_dagster.ops.runs.celery_worker -y deploy/celery.yaml [-q QUEUE] [-n NAME] [-c N] [-- CELERY ARGS]

``dagster-celery worker start -y deploy/celery.yaml`` resolves the config,
broker URL and password included, and writes it into
``$DAGSTER_HOME/dagster_celery/config/<uuid>/dagster_celery_config.py`` (mode
0644) on every start, never removing it. This starts the same worker
(dagster-celery's tasks, with the settings of the yaml validated by
dagster-celery's own schema) from an app built in memory instead: the worker
process reads the yaml and the broker variable it names when it starts, and
the URL is never in a file or on a command line.

Differences from ``dagster-celery worker start``, on purpose:

* **one step at a time per worker** (``--concurrency 1``; Celery's default is
  one pool process per core): a step already uses every core through DuckDB,
  and a worker that dies hands back at most the one step it held. Start more
  workers (or pass ``-c N``) for more steps at once;
* **a unique name per worker** (``atlasmart-<pid>@<host>``, the pid of the
  worker's main process): two workers on one host never share a name, which
  Celery's remote control and monitoring need;
* the yaml's ``include`` modules are imported when the worker starts
  (``dagster-celery worker start`` ignores them), so a worker whose code does
  not import fails at start, not at its first step;
* the queue defaults to ``$ATLASMART_CELERY_QUEUE`` (else ``dagster``), the one
  the runs put their steps on.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ...settings import Settings, current

# The yaml the worker process builds its app from (set by main() for the process it becomes).
CONFIG_ENV = Settings.celery_worker_config.name
QUEUE_ENV = Settings.celery_queue.name  # as in atlasmart_dagster/definitions.py, which routes the steps
APP = "atlasmart_dagster.ops.runs.celery_worker"


def worker_config(config_yaml: str) -> dict:
    """The settings of ``config_yaml`` as dagster-celery validates them (the broker read from its variable)."""
    from dagster_celery.cli import get_validated_config  # local: only a worker needs dagster-celery

    return dict(get_validated_config(config_yaml))


def build_app(config_yaml: str):
    """dagster-celery's worker app, configured in memory from ``config_yaml``: what ``dagster_celery.app`` is."""
    from dagster_celery.executor import CeleryExecutor
    from dagster_celery.make_app import make_app
    from dagster_celery.tasks import create_execute_job_task, create_resume_job_task, create_task

    config = worker_config(config_yaml)
    settings = {k: config.get(k) for k in ("broker", "backend", "include", "config_source")}
    # The run side builds its app the same way (dagster_celery's executor: for_cli + app_args).
    app = make_app(CeleryExecutor.for_cli(**settings).app_args())
    create_task(app)
    create_execute_job_task(app)
    create_resume_job_task(app)
    return app


def __getattr__(name: str):
    # `celery -A atlasmart_dagster.ops.runs.celery_worker worker` asks this module for `app`;
    # it is built on that first request only, so importing the module for main() builds nothing.
    if name == "app":
        config = current().celery_worker_config
        if config is None:
            raise KeyError(f"{CONFIG_ENV} is not set: start the worker with `python -m {APP} -y CONFIG`")
        app = build_app(config)
        globals()["app"] = app
        return app
    raise AttributeError(name)


def celery_command(args: argparse.Namespace, extra: list[str], pid: int) -> list[str]:
    """The ``celery worker`` command line for ``args`` (no secret on it)."""
    return [
        sys.executable, "-m", "celery", "-A", APP, "worker",
        "--loglevel", args.loglevel,
        "-Q", args.queue,
        "-n", args.name or f"atlasmart-{pid}@%h",
        "--concurrency", str(args.concurrency),
        # As `dagster-celery worker start`: a worker takes a step only when it is free.
        "--prefetch-multiplier=1",
        *extra,
    ]


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        prog="python -m atlasmart_dagster.ops.runs.celery_worker",
        description="Start a Celery worker for the team deployment's steps, the broker URL read from the "
                    "environment only (deploy/README.md). Arguments after -- go to `celery worker`.",
    )
    parser.add_argument("-y", "--config-yaml", required=True, type=Path,
                        help="the worker config (deploy/celery.yaml): broker variable, backend, includes, settings")
    parser.add_argument("-q", "--queue", default=current().celery_queue,
                        help=f"the broker queue to take steps from (default ${QUEUE_ENV}, else dagster)")
    parser.add_argument("-n", "--name", help="the worker's node name (default atlasmart-<pid>@<host>, unique per host)")
    parser.add_argument("-c", "--concurrency", type=int, default=1,
                        help="steps this worker runs at once, one pool process each (default 1)")
    parser.add_argument("-l", "--loglevel", default="INFO", help="Celery's log level (default INFO)")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    if not args.config_yaml.is_file():
        parser.error(f"--config-yaml {args.config_yaml}: no such file")
    return args, extra


def main(argv: list[str] | None = None) -> int:
    """Check the config, then become the Celery worker (same pid, so the default name names this process)."""
    args, extra = parse(argv)
    try:
        worker_config(str(args.config_yaml))  # a wrong yaml or a missing broker variable fails here, in one line
    except Exception as exc:  # noqa: BLE001 - dagster-celery raises config and check errors of several kinds
        print(f"celery_worker: error: {args.config_yaml}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    env = {**os.environ, CONFIG_ENV: str(args.config_yaml.resolve())}
    command = celery_command(args, extra, os.getpid())
    os.execve(sys.executable, command, env)
    return 0  # not reached: execve replaced this process


if __name__ == "__main__":
    sys.exit(main())
