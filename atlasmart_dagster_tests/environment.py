"""The scratch environment tests build on: the sample's days and a home with its own landing copy, resource,
definitions and Dagster instance. Test modules import it from here; ``conftest`` only turns it into fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg

from atlasmart_dagster.defs.resources import AtlasmartResource
from atlasmart_dagster.store.home import sample_dir
from atlasmart_dagster.store.platform import Platform

SAMPLE_DAYS = ["2026-09-17", "2026-09-18", "2026-09-19", "2026-09-20", "2026-09-21"]


class Env:
    """A scratch AtlasMart environment: home, landing copy, resource, defs and a Dagster instance."""

    def __init__(self, root: Path, clock: str = ""):
        """``clock`` empty: the home's (the system's until a process asks for one); see store/clock.py."""
        self.root = root
        self.landing = root / "source" / "landing"
        shutil.copytree(sample_dir() / "landing", self.landing)
        shutil.copytree(sample_dir() / "reference", root / "source" / "reference")
        self.home = root / "home"
        self.resource = AtlasmartResource(home=str(self.home), landing=str(self.landing), clock=clock)
        self.platform: Platform = self.resource.platform
        from atlasmart_dagster.definitions import build_definitions

        self.defs = build_definitions(self.resource)
        self.instance = dg.DagsterInstance.ephemeral()

    @property
    def ledger(self):
        return self.platform.ledger

    @property
    def warehouse(self):
        return self.platform.warehouse

    def day_dir(self, partition: str) -> Path:
        return self.landing / f"sales_date={partition}"


def env_with_asset(root: Path, spec, asset):
    """An Env whose registry holds ``spec`` and whose definitions add ``asset`` (a mart a test declares), for as
    long as the generator runs; a fixture yields from it so the registry is back as the package declares it after."""
    from atlasmart_dagster.definitions import build_definitions
    from atlasmart_dagster.store.tables import REGISTRY

    with REGISTRY.registered(spec):
        env = Env(root)
        env.defs = build_definitions(env.resource, extra_assets=[asset])
        yield env
