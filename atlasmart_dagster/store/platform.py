"""The platform: one object that opens the parts of an AtlasMart home.

Dagster assets get it from ``AtlasmartResource``; the ``atlasmart`` command
line builds it directly. Both therefore read and write exactly the same
warehouse, raw store, ledger and clock.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..errors import UsageError
from .clock import Clock, LogicalClock, SystemClock
from .home import CLOCK_ENV, AtlasmartHome, resolve_landing
from .landing import LandingZone
from .ledger import Ledger
from .raw_store import RawStore
from .warehouse import Warehouse

DEFAULT_CHUNK_ROWS = 2_000_000


@dataclass
class Platform:
    home: AtlasmartHome
    landing_root: Path
    clock: Clock
    chunk_rows: int = DEFAULT_CHUNK_ROWS

    @classmethod
    def open(
        cls,
        home: str | os.PathLike | None = None,
        landing: str | os.PathLike | None = None,
        clock: str | None = None,
        chunk_rows: int | None = None,
        embedded: bool = False,
    ) -> "Platform":
        """Open a home; every argument falls back to its environment variable, then the default.

        ``embedded`` opens a self-contained home even where the team settings are set (drills).
        """
        resolved = AtlasmartHome.resolve(home, embedded=embedded).ensure()
        mode = (clock or os.environ.get(CLOCK_ENV) or "system").lower()
        if mode not in ("system", "logical"):
            raise UsageError(f"the clock must be 'system' or 'logical', not {mode!r} (--clock or ${CLOCK_ENV})")
        return cls(
            home=resolved,
            landing_root=resolve_landing(landing),
            clock=LogicalClock(resolved.clock_file) if mode == "logical" else SystemClock(),
            chunk_rows=chunk_rows or DEFAULT_CHUNK_ROWS,
        )

    @cached_property
    def warehouse(self) -> Warehouse:
        return Warehouse(self.home)

    @cached_property
    def ledger(self) -> Ledger:
        return Ledger(self.home.database_url or self.home.ledger_db)

    @cached_property
    def raw_store(self) -> RawStore:
        return RawStore(self.home.raw_dir)

    @cached_property
    def landing(self) -> LandingZone:
        return LandingZone(self.landing_root)
