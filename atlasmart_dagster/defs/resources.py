"""Dagster resources: how assets, checks and sensors reach the platform."""

from __future__ import annotations

import dagster as dg
from pydantic import Field, PrivateAttr

from ..store.platform import DEFAULT_CHUNK_ROWS, Platform


class AtlasmartResource(dg.ConfigurableResource):
    """The AtlasMart platform of one home: Iceberg warehouse, raw store, ledger, landing zone, clock.

    Every field may stay empty: the platform then reads ``ATLASMART_HOME``,
    ``ATLASMART_LANDING`` and ``ATLASMART_CLOCK`` when a run starts (never at
    import), and falls back to ``./.atlasmart``, the bundled sample landing
    zone and the system clock.
    """

    home: str = Field(default="", description="AtlasMart home folder (empty: $ATLASMART_HOME or ./.atlasmart)")
    landing: str = Field(
        default="", description="ERP landing zone folder (empty: $ATLASMART_LANDING or the bundled sample)"
    )
    clock: str = Field(default="", description="'system' or 'logical' (empty: $ATLASMART_CLOCK or system)")
    chunk_rows: int = Field(
        default=DEFAULT_CHUNK_ROWS,
        description="Rows processed per chunk when a run covers many partitions (bounds memory).",
    )
    embedded: bool = Field(
        default=False,
        description="A self-contained home even where the team settings ($ATLASMART_DATABASE_URL) are set "
        "(drills: a rehearsal never writes into the team's shared state).",
    )

    _platform: Platform | None = PrivateAttr(default=None)

    @property
    def platform(self) -> Platform:
        if self._platform is None:
            self._platform = Platform.open(
                home=self.home or None,
                landing=self.landing or None,
                clock=self.clock or None,
                chunk_rows=self.chunk_rows,
                embedded=self.embedded,
            )
        return self._platform
