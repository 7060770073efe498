"""Command: dagster-home (print, and prepare, the Dagster instance folder of an AtlasMart home)."""

from __future__ import annotations

import argparse

from .context import CliContext


def cmd_dagster_home(args: argparse.Namespace, ctx: CliContext) -> int:
    """Print the DAGSTER_HOME prepared for this AtlasMart home (with the project's dagster.yaml)."""
    from ..store.instance.dagster_instance import prepare_dagster_home  # lazy: loaded by its command only

    print(prepare_dagster_home(ctx.platform.home))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dagster-home", help=cmd_dagster_home.__doc__, description=cmd_dagster_home.__doc__)
    p.set_defaults(handler=cmd_dagster_home)
