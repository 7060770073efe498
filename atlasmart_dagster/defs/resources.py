"""Dagster resources: how assets, checks and sensors reach the platform."""

from __future__ import annotations

import functools

import dagster as dg
from pydantic import Field, PrivateAttr

from ..store.clock import HomeClockRefused
from ..store.platform import DEFAULT_CHUNK_ROWS, Platform

# Platforms an ``atlasmart`` command opened and lends to the runs it executes in
# its own process, by the resource config that names them. Dagster builds each
# run's resource anew from its config (a private attribute does not survive that
# copy), so a run finds the loan by its config; runs in other processes (the
# daemon's, Celery workers') never see it and open their own from the same config.
_LENT: dict[tuple, Platform] = {}


class AtlasmartResource(dg.ConfigurableResource):
    """The AtlasMart platform of one home: Iceberg warehouse, raw store, ledger, landing zone, clock.

    Every field may stay empty: the platform then reads ``ATLASMART_HOME``,
    ``ATLASMART_LANDING`` and ``ATLASMART_CLOCK`` when a run starts (never at
    import), and falls back to ``./.atlasmart``, the bundled sample landing
    zone and the home's clock (``store/clock.py``: one clock per home; a
    ``clock`` other than the home's is refused with ``HomeClockRefused``).
    """

    home: str = Field(default="", description="AtlasMart home folder (empty: $ATLASMART_HOME or ./.atlasmart)")
    landing: str = Field(
        default="", description="ERP landing zone folder (empty: $ATLASMART_LANDING or the bundled sample)"
    )
    clock: str = Field(default="", description="'system' or 'logical', refused unless it is the home's clock "
                       "(empty: $ATLASMART_CLOCK, else the home's clock)")
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

    @classmethod
    def lending(cls, platform: Platform) -> "AtlasmartResource":
        """A resource naming ``platform``'s home, whose runs in this process use ``platform`` itself.

        A command opens its home once: the runs it executes in-process share its
        platform (and its store check) instead of opening the home again each.
        The loan lasts until ``end_loan``; the next command checks the stores anew.
        """
        resource = cls(
            home=str(platform.home.root),
            landing=str(platform.landing_root),
            clock="",  # the home's, as the platform resolved it: a run opening the home anew resolves it the same
            chunk_rows=platform.chunk_rows,
        )
        _LENT[resource._config()] = resource._platform = platform
        return resource

    def end_loan(self) -> None:
        """Runs started after this open the home again themselves."""
        if _LENT.get(self._config()) is self._platform:
            del _LENT[self._config()]

    def _config(self) -> tuple:
        return self.home, self.landing, self.clock, self.chunk_rows, self.embedded

    @property
    def platform(self) -> Platform:
        if self._platform is None:
            self._platform = _LENT.get(self._config())
        if self._platform is None:
            self._platform = Platform.open(
                home=self.home or None,
                landing=self.landing or None,
                clock=self.clock or None,
                chunk_rows=self.chunk_rows,
                embedded=self.embedded,
                clock_asked_as="the resource's clock setting",
            )
        return self._platform


def skips_when_clock_refused(evaluation):
    """A sensor or schedule whose process asks for another clock than its home's skips, with the refusal.

    Its platform is refused before anything is read or written (``HomeClockRefused``), so a daemon on the
    wrong clock measures nothing: the tick shows why in the UI instead of failing on every evaluation.
    """

    @functools.wraps(evaluation)
    def evaluate(*args, **kwargs):
        try:
            return evaluation(*args, **kwargs)
        except HomeClockRefused as exc:
            return dg.SkipReason(str(exc))

    return evaluate
