"""What every command gets: the platform of the chosen home, Dagster when it needs it, and argument types.

Every command builds one, so this module loads nothing heavy: the platform
(pyiceberg, DuckDB), Dagster and the definitions are imported when a command
first asks for them (cold start).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from ..defs.first_sales_date import is_iso_day

if TYPE_CHECKING:
    import dagster as dg

    from ..store.platform import Platform



def partition_problem(day: str) -> str | None:
    """Why ``day`` is not a sales_date partition (not ISO, before the first, not ended yet, after the last), or None."""
    # local: loads Dagster (cold start)
    from ..defs.partitions import FIRST_SALES_DATE, LAST_SALES_DATE, daily_partitions, partitions_span

    try:
        iso_date(day)
    except argparse.ArgumentTypeError as exc:
        return str(exc)
    if day < FIRST_SALES_DATE:
        return f"{day} is before the first partition {FIRST_SALES_DATE}"
    last = daily_partitions.get_last_partition_key()
    if last is None or day > last:
        return f"{day} is not a partition{'' if LAST_SALES_DATE else ' yet'}: partitions are {partitions_span()}"
    return None


def iso_date(text: str) -> str:
    """argparse ``type=``: any day in YYYY-MM-DD form (a due date, a generated landing zone's first day)."""
    if not is_iso_day(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a date in YYYY-MM-DD form")
    return text


def sales_date(text: str) -> str:
    """argparse ``type=``: a sales_date that is a partition today (ISO form, within the partition range)."""
    problem = partition_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


@dataclass
class CliContext:
    home: str | None
    landing: str | None
    clock: str | None
    as_json: bool = False
    ephemeral_instance: bool = False
    log_level: str | None = "CRITICAL"

    @cached_property
    def platform(self) -> Platform:
        from ..errors import UsageError  # local: loads DuckDB (cold start)
        from ..store.clock import LogicalClock  # local: loads errors (cold start)
        from ..store.home import AtlasmartHome, home_path_problem  # local: cold start
        from ..store.platform import Platform  # local: loads pyiceberg, SQLAlchemy, DuckDB (cold start)

        # Refused before anything is created: a stray folder beside the home is what such a path would make.
        home = AtlasmartHome.resolve(self.home)
        for folder, what in ((home.root, "the home path"), (home.shared_root, "$ATLASMART_WAREHOUSE")):
            problem = folder and home_path_problem(folder, what)
            if problem:
                raise UsageError(problem)
        platform = Platform.open(home=self.home, landing=self.landing, clock=self.clock)
        clock = platform.clock
        if isinstance(clock, LogicalClock) and not clock.path.exists():
            # Logical time is set by drills and tests; a command cannot guess it.
            raise UsageError(
                f"logical time is not set in this home (no {clock.path}): use --clock system, or set it first "
                "with `atlasmart clock set 2026-09-22T08:00:00Z`"
            )
        return platform

    @cached_property
    def resource(self):
        from ..defs.resources import AtlasmartResource  # lazy: loaded by its command only

        # The runs this command executes in-process use its platform; see close().
        return AtlasmartResource.lending(self.platform)

    def close(self) -> None:
        """End the command: runs started later (another command in this process) open their home themselves."""
        if "resource" in self.__dict__:
            self.resource.end_loan()

    @cached_property
    def defs(self) -> dg.Definitions:
        from ..definitions import build_definitions  # lazy: loaded by its command only

        return build_definitions(self.resource)

    @cached_property
    def instance(self) -> dg.DagsterInstance:
        if self.ephemeral_instance:
            import dagster as dg  # local: loads Dagster (cold start)

            return dg.DagsterInstance.ephemeral()
        from ..store.instance.dagster_instance import dagster_instance  # lazy: loaded by its command only

        return dagster_instance(self.platform.home)
