"""The Dagster instance AtlasMart runs against.

If ``DAGSTER_HOME`` is set, that instance is used (the operator's); a
``DAGSTER_HOME`` that does not exist yet is created and prepared like the
default. Otherwise ``$ATLASMART_HOME/dagster`` is prepared with the project's
``dagster.yaml`` (lanes and run queue) so that runs started by ``atlasmart``
show up in the UI started with ``DAGSTER_HOME=$ATLASMART_HOME/dagster dagster dev``.

Creating an instance creates its SQLite storage the first time. Dagster does
not guard that against a second process doing the same (two first commands on
a fresh home left two rows in ``alembic_version`` and every later command
failed with "more than one head"). So ``prepare_dagster_home`` (``atlasmart
dagster-home``) creates the whole storage, migrated, before it returns the
folder: a ``dagster`` command started on it never creates a database. Atlasmart's
own commands prepare the folder under a file lock in it, and the pooled storage
creates any database under its storage lock
(``dagster_sqlite_adapter.storage_lock``), which also repairs a doubled version
left by an earlier race, or refuses it with the fix.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Iterator

import dagster as dg

from ..errors import UsageError
from .dagster_sqlite_adapter import STORAGE_LOCK_NAME, prepare_storage, storage_lock
from .home import AtlasmartHome

DAGSTER_HOME_ENV = "DAGSTER_HOME"
POOLED_STORAGE = """
storage:
  # Dagster's SQLite storage in this folder, with the event log's connections
  # kept open between writes (atlasmart_dagster/store/dagster_sqlite_adapter.py).
  custom:
    module: atlasmart_dagster.store.dagster_sqlite_adapter
    class: PooledSqliteStorage
    config:
      base_dir: {folder}
"""
INIT_LOCK_NAME = ".atlasmart-init.lock"


def packaged_instance_config(team: bool = False) -> Path:
    """The project's instance config: the embedded one, or the team deployment's (Postgres storage)."""
    name = "dagster.team.yaml" if team else "dagster.yaml"
    return Path(str(resources.files("atlasmart_dagster") / "instance" / name))


@contextmanager
def _first_use_lock(folder: Path, origin: str) -> Iterator[None]:
    """Create ``folder`` and hold its exclusive init lock (waits for the holder) until the block ends."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"the Dagster home {folder} ({origin}) is not a folder: point it at a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = os.open(folder / INIT_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise UsageError(
            f"cannot prepare the Dagster home {folder} ({origin}; {exc.strerror}): point it at a folder you can write"
        ) from exc
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # releases the lock


def _write_config(home: AtlasmartHome, folder: Path) -> None:
    """Write the project's dagster.yaml into ``folder`` unless one is there (call under the init lock)."""
    config = folder / "dagster.yaml"
    if config.exists():
        return
    # Pin the JSON log file to this home: runs on this instance log here even
    # when ATLASMART_HOME is not set in their environment.
    text = packaged_instance_config(home.team).read_text().replace(
        "class: atlasmart_dagster.ops.observability.logs.JsonLinesHandler\n",
        # JSON is YAML: a home path holding ": " or " #" stays one string
        f"class: atlasmart_dagster.ops.observability.logs.JsonLinesHandler\n        home: {json.dumps(str(home.root))}\n",
    )
    if not home.team:
        # The pooled SQLite storage needs the folder's path, also when DAGSTER_HOME is not set (atlasmart's own
        # commands): written here rather than in the packaged file, which then works wherever it is copied.
        text += POOLED_STORAGE.format(folder=json.dumps(str(folder)))
    config.write_text(text)


def prepare_dagster_home(home: AtlasmartHome) -> Path:
    """Create ``<home>/dagster`` with the project's dagster.yaml (kept if it exists) and its storage, migrated.

    The embedded storage (SQLite in the folder) is created here, under the
    storage lock, so that no run started on the folder afterwards creates or
    stamps a database (two first runs at once could stamp one twice). The team
    deployment's storage is the shared Postgres database, not created here.
    """
    target = home.dagster_home
    with _first_use_lock(target, "inside the AtlasMart home"):
        _write_config(home, target)
        if not home.team:
            dg.DagsterInstance.from_config(str(target)).dispose()
    return target


def dagster_instance(home: AtlasmartHome) -> dg.DagsterInstance:
    """The instance at ``$DAGSTER_HOME``, else at ``<home>/dagster``; its storage is created under the init lock."""
    configured = os.environ.get(DAGSTER_HOME_ENV)
    if not configured:
        with _first_use_lock(home.dagster_home, "inside the AtlasMart home"):
            _write_config(home, home.dagster_home)
            return dg.DagsterInstance.from_config(str(home.dagster_home))
    folder = Path(configured)
    if not folder.is_absolute():
        raise UsageError(f"${DAGSTER_HOME_ENV} {configured!r} must be an absolute path: set it to one, or unset it")
    missing = not folder.exists()
    with _first_use_lock(folder, f"${DAGSTER_HOME_ENV}"):
        # A folder that did not exist (here, or in a concurrent first command,
        # which leaves only the lock file) gets the project's instance, as
        # `atlasmart dagster-home` prepares it; an existing one is the operator's.
        if missing or {p.name for p in folder.iterdir()} <= {INIT_LOCK_NAME, STORAGE_LOCK_NAME}:
            _write_config(home, folder)
        # An operator's folder may hold Dagster's own SQLite storage: a doubled
        # version there is repaired (or refused with the fix) like the pooled one's.
        with storage_lock(str(folder)):
            prepare_storage(str(folder))
        return dg.DagsterInstance.get()


def resolve_run_id(instance: dg.DagsterInstance, text: str) -> str | None:
    """The full id of the run ``text`` names: a whole run id, or a unique prefix (the UI shows 8 characters).

    None when no run matches; a prefix that matches several runs is a usage error naming them.
    """
    text = text.strip().lower()
    if instance.get_run_record_by_id(text) is not None:
        return text
    if not text or any(c not in "0123456789abcdef-" for c in text):
        return None
    matches = [run_id for run_id in instance.get_run_ids() if run_id.startswith(text)]
    if len(matches) > 1:
        raise UsageError(f"run id prefix {text!r} matches {len(matches)} runs ({', '.join(m[:12] for m in matches[:5])}…): "
                         "give more characters")
    return matches[0] if matches else None
