"""Named locks of a home: file locks on one machine, Postgres advisory locks across machines.

Two uses. One-time setup that two processes could race (creating the Iceberg
catalog's tables and a table) takes ``home_lock(home, "catalog")``. Work
started outside the Dagster run queue (``atlasmart backfill`` executing in
its own process) takes the backfill lane's lock: one such backfill per
deployment at a time, like one backfill run in the queue.

In the embedded home these are ``flock`` locks on files in ``<home>/locks``,
which hold on one machine only. In the team deployment they are Postgres
session advisory locks on the shared database, which hold for every machine
that reaches it; a lock is released when its holder's connection ends, so a
killed process never leaves one behind.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from contextlib import contextmanager
from typing import Iterator

from ..errors import LaneViolation, TransientError
from .home import AtlasmartHome, libpq_url


def _advisory_key(name: str) -> int:
    """A stable signed 64-bit key for ``name`` (the same on every machine and Python)."""
    digest = hashlib.sha256(f"atlasmart:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def _file_lock(home: AtlasmartHome, name: str, wait_seconds: float | None, label: str) -> Iterator[None]:
    home.locks_dir.mkdir(parents=True, exist_ok=True)
    path = home.locks_dir / f"{name}.lock"
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if wait_seconds is None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + wait_seconds
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        holder = path.read_text().strip() or "another process"
                        raise LaneViolation(f"{label} is busy ({holder}); retry when it is free") from None
                    time.sleep(0.2)
        os.ftruncate(handle, 0)
        os.write(handle, f"pid {os.getpid()}".encode())
        yield
    finally:
        os.close(handle)  # releases the lock


@contextmanager
def _advisory_lock(home: AtlasmartHome, name: str, wait_seconds: float | None, label: str) -> Iterator[None]:
    # psycopg2 comes with the `team` extra, which the embedded default does not need.
    import psycopg2

    key = _advisory_key(name)
    try:
        con = psycopg2.connect(libpq_url(home.database_url), application_name=f"atlasmart lock {name} pid {os.getpid()}")
    except psycopg2.OperationalError as exc:
        raise TransientError(f"the deployment database is unreachable ({str(exc).strip()})") from exc
    con.autocommit = True
    try:
        with con.cursor() as cur:
            if wait_seconds is None:
                cur.execute("SELECT pg_advisory_lock(%s)", (key,))
            else:
                deadline = time.monotonic() + wait_seconds
                while True:
                    cur.execute("SELECT pg_try_advisory_lock(%s)", (key,))
                    if cur.fetchone()[0]:
                        break
                    if time.monotonic() >= deadline:
                        raise LaneViolation(f"{label} is busy ({_holder(cur, key)}); retry when it is free")
                    time.sleep(0.2)
        yield
    finally:
        con.close()  # ends the session, which releases the lock


def _holder(cur, key: int) -> str:
    """Who holds advisory lock ``key``, from pg_locks (the holder's application_name names it)."""
    cur.execute(
        "SELECT a.application_name, a.client_addr FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND ((l.classid::bigint << 32) | l.objid::bigint) = %s",
        (key,),
    )
    row = cur.fetchone()
    return f"{row[0]} at {row[1] or 'local socket'}" if row else "another process"


@contextmanager
def home_lock(
    home: AtlasmartHome, name: str, wait_seconds: float | None = None, label: str | None = None
) -> Iterator[None]:
    """Hold the named lock of ``home``'s deployment (``wait_seconds`` None: wait as long as it takes).

    Raises ``LaneViolation`` naming the holder when the lock stays busy past ``wait_seconds``.
    """
    lock = _advisory_lock if home.team else _file_lock
    with lock(home, name, wait_seconds, label or name):
        yield


@contextmanager
def lane_lock(home: AtlasmartHome, lane: str, wait_seconds: float = 0.0) -> Iterator[None]:
    """The lane's lock for in-process runs, refused with ``LaneViolation`` when another holds it."""
    with home_lock(home, lane, wait_seconds, label=f"the {lane} lane"):
        yield
