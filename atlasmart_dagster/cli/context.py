"""What every command gets: the platform of the chosen home, and Dagster when it needs it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import dagster as dg

from ..store.platform import Platform


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
        return Platform.open(home=self.home, landing=self.landing, clock=self.clock)

    @cached_property
    def resource(self):
        from ..defs.resources import AtlasmartResource  # lazy: loaded by its command only

        p = self.platform
        return AtlasmartResource(
            home=str(p.home.root),
            landing=str(p.landing_root),
            clock="logical" if type(p.clock).__name__ == "LogicalClock" else "system",
            chunk_rows=p.chunk_rows,
        )

    @cached_property
    def defs(self) -> dg.Definitions:
        from ..definitions import build_definitions  # lazy: loaded by its command only

        return build_definitions(self.resource)

    @cached_property
    def instance(self) -> dg.DagsterInstance:
        if self.ephemeral_instance:
            return dg.DagsterInstance.ephemeral()
        from ..store.dagster_instance import dagster_instance  # lazy: loaded by its command only

        return dagster_instance(self.platform.home)
