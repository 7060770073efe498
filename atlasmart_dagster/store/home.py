"""Where AtlasMart keeps its state: the embedded default home.

One folder, ``ATLASMART_HOME`` (default ``./.atlasmart``), holds everything
that makes the data product, so a backup, a restore or a scratch drill is one
folder:

``catalog.db``   Iceberg SQL catalog (SQLite)
``warehouse/``   Iceberg table metadata and Parquet data files
``raw/``         the immutable raw store, one folder per batch id
``ledger.db``    append-only ledger: batches, checks, certification, SLOs, incidents
``clock.json``   logical time (drills and tests only)
``dagster/``     a DAGSTER_HOME prepared with the project's instance config
``artifacts/``   drill evidence, notices, runbooks

The sample landing zone ships inside the package and is the default source.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import UsageError

HOME_ENV = "ATLASMART_HOME"
LANDING_ENV = "ATLASMART_LANDING"
CLOCK_ENV = "ATLASMART_CLOCK"
DEFAULT_HOME_DIRNAME = ".atlasmart"


def sample_dir() -> Path:
    """The bundled sample source (landing zone and reference dimensions)."""
    return Path(str(resources.files("atlasmart_dagster") / "sample_data"))


def sample_landing_dir() -> Path:
    return sample_dir() / "landing"


def resolve_landing(path: str | os.PathLike | None = None) -> Path:
    """Explicit path, else ``$ATLASMART_LANDING``, else the bundled sample."""
    chosen = path or os.environ.get(LANDING_ENV)
    return Path(chosen).resolve() if chosen else sample_landing_dir()


@dataclass(frozen=True)
class AtlasmartHome:
    """Paths inside one AtlasMart home folder."""

    root: Path

    @classmethod
    def resolve(cls, path: str | os.PathLike | None = None) -> "AtlasmartHome":
        """Explicit path, else ``$ATLASMART_HOME``, else ``./.atlasmart``."""
        chosen = path or os.environ.get(HOME_ENV) or Path.cwd() / DEFAULT_HOME_DIRNAME
        return cls(Path(chosen).resolve())

    @property
    def catalog_db(self) -> Path:
        return self.root / "catalog.db"

    @property
    def warehouse_dir(self) -> Path:
        return self.root / "warehouse"

    @property
    def raw_dir(self) -> Path:
        return self.root / "raw"

    @property
    def ledger_db(self) -> Path:
        return self.root / "ledger.db"

    @property
    def clock_file(self) -> Path:
        return self.root / "clock.json"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster"

    @property
    def locks_dir(self) -> Path:
        return self.root / "locks"

    def ensure(self) -> "AtlasmartHome":
        """Create the home's folders; raise ``UsageError`` if the home is not a folder or cannot be created."""
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(
                f"the AtlasMart home {self.root} is not a folder: choose a folder (--home or ${HOME_ENV})"
            )
        try:
            for folder in (self.root, self.warehouse_dir, self.raw_dir, self.locks_dir):
                folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"cannot create the AtlasMart home {self.root} ({exc.strerror}: {exc.filename}): "
                f"choose a folder you can write (--home or ${HOME_ENV})"
            ) from exc
        return self
