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

A folder this user cannot write (read-only, another user's, on a read-only
or full disk) is refused before Dagster opens it, in one line naming the
file and the fix (``writable_or_refused``): Dagster would otherwise fail at
its first write, part-way into a run, with a traceback (``dagster`` commands)
or an "attempt to write a readonly database" (ours).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import tempfile
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Iterator

import dagster as dg

from ...errors import EnvironmentFault, UsageError
from .dagster_sqlite_adapter import STORAGE_LOCK_NAME, prepare_storage, storage_lock
from ..home import AtlasmartHome, heal_shm, write_fault

DAGSTER_HOME_ENV = "DAGSTER_HOME"
POOLED_STORAGE = """
storage:
  # Dagster's SQLite storage in this folder, with the event log's connections
  # kept open between writes (atlasmart_dagster/store/instance/dagster_sqlite_adapter.py).
  custom:
    module: atlasmart_dagster.store.instance.dagster_sqlite_adapter
    class: PooledSqliteStorage
    config:
      base_dir: {folder}
"""
INIT_LOCK_NAME = ".atlasmart-init.lock"
# The folders of Dagster's SQLite storage in an instance folder, which must take new files (SQLite's -wal, -shm
# and -journal), and the databases every command writes (runs, the event log's index, schedules), which must
# open for writing. Dagster's own SQLite event log keeps one more database per run in history/runs: written by
# that run only, and as many as there were runs, they are not probed.
STORAGE_FOLDERS = (".", "history", "history/runs", "schedules")
STORAGE_DATABASES = ("history/runs.db", "history/runs/index.db", "schedules/schedules.db")
_WRITE_REFUSED = {errno.EACCES: "permission denied", errno.EPERM: "permission denied",
                  errno.EROFS: "read-only file system", errno.ENOSPC: "the disk is full",
                  errno.EDQUOT: "the disk quota is full"}


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


def _probe(path: Path) -> None:
    """Write to ``path`` as SQLite will: a folder takes a new file with a page in it, a file opens for writing."""
    if path.is_dir():
        handle, probe = tempfile.mkstemp(prefix=".atlasmart-probe-", dir=path)
        try:
            os.write(handle, b"\0" * 4096)  # a full disk refuses the blocks here (no fsync: every command probes)
        finally:
            os.close(handle)
            os.unlink(probe)
    else:
        try:
            os.close(os.open(path, os.O_RDWR))
        except FileNotFoundError:
            # Listed a moment ago, gone now: SQLite removes a -wal (and a -journal) when another process (the
            # daemon, the UI) closes its last connection. Nothing is left to refuse; the folder's probe covers
            # the file SQLite makes again.
            return


def writable_or_refused(folder: Path, origin: str) -> None:
    """Refuse, in one line naming the file and the fix, a Dagster folder this user cannot write.

    Probed by writing (a file in each storage folder, each SQLite database and
    its leftover -wal/-shm opened for writing), not by its permission bits,
    which root ignores and which say nothing of a read-only or full disk.
    """
    paths = [folder / name for name in STORAGE_FOLDERS if (folder / name).is_dir()]
    databases = [folder / name for name in STORAGE_DATABASES if (folder / name).is_file()]
    for database in databases:
        heal_shm(database)  # a -shm left 0444 by a database once read-only, fixed since
        sides = (Path(f"{database}{side}") for side in ("", "-wal", "-shm", "-journal"))
        paths += [p for p in sides if p.is_file()]
    for path in paths:
        try:
            _probe(path)
        except OSError as exc:
            if exc.errno not in _WRITE_REFUSED:
                raise
            fault = write_fault(path)
            if path.is_dir() and (fault is None or fault.reason == "permissions"):
                why = (f"cannot create files in {path} (mode {stat.S_IMODE(path.stat().st_mode):04o}): make it "
                       f"writable by this user (chmod u+w {path})")
            else:
                why = fault.message if fault else f"cannot write {path}: {_WRITE_REFUSED[exc.errno]}"
            where = "$DAGSTER_HOME" if origin.startswith("$") else "$ATLASMART_HOME (or --home)"
            raise EnvironmentFault(f"the Dagster folder {folder} ({origin}) is not writable "
                                   f"({_WRITE_REFUSED[exc.errno]}): {why}; or point {where} elsewhere") from exc


# Module paths an older release wrote into a home's dagster.yaml, and where they live now: the
# file is the user's (kept across upgrades), so a moved class is named anew there, not imported
# from a shim left behind.
_MOVED_MODULES = {
    "atlasmart_dagster.ops.lane_coordinator\n": "atlasmart_dagster.ops.runs.lane_coordinator\n",
    "atlasmart_dagster.store.dagster_sqlite_adapter\n": "atlasmart_dagster.store.instance.dagster_sqlite_adapter\n",
}


def _upgrade_module_paths(config: Path) -> None:
    """Rename, in place and atomically, a class path this release moved (nothing else in the file changes)."""
    text = config.read_text()
    upgraded = text
    for old, new in _MOVED_MODULES.items():
        upgraded = upgraded.replace(f"module: {old}", f"module: {new}")
    if upgraded != text:
        staged = config.with_name(config.name + ".upgrading")
        staged.write_text(upgraded)
        staged.replace(config)


def _write_config(home: AtlasmartHome, folder: Path) -> None:
    """Write the project's dagster.yaml into ``folder`` unless one is there (call under the init lock)."""
    config = folder / "dagster.yaml"
    if config.exists():
        _upgrade_module_paths(config)
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
        writable_or_refused(target, "inside the AtlasMart home")
        _write_config(home, target)
        if not home.team:
            dg.DagsterInstance.from_config(str(target)).dispose()
    return target


def dagster_instance(home: AtlasmartHome) -> dg.DagsterInstance:
    """The instance at ``$DAGSTER_HOME``, else at ``<home>/dagster``; its storage is created under the init lock."""
    configured = os.environ.get(DAGSTER_HOME_ENV)
    if not configured:
        with _first_use_lock(home.dagster_home, "inside the AtlasMart home"):
            writable_or_refused(home.dagster_home, "inside the AtlasMart home")
            _write_config(home, home.dagster_home)
            return dg.DagsterInstance.from_config(str(home.dagster_home))
    folder = Path(configured)
    if not folder.is_absolute():
        raise UsageError(f"${DAGSTER_HOME_ENV} {configured!r} must be an absolute path: set it to one, or unset it")
    missing = not folder.exists()
    with _first_use_lock(folder, f"${DAGSTER_HOME_ENV}"):
        writable_or_refused(folder, f"${DAGSTER_HOME_ENV}")
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
