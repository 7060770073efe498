"""Lane locks for work started outside the Dagster run queue.

Runs launched by the daemon or the UI are admitted by the run queue's tag
limits (``dagster.yaml``). ``atlasmart backfill`` executes in-process, which
the queue never sees, so it takes the backfill lane's file lock instead: one
in-process backfill per home at a time, like one backfill run in the queue.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import LaneViolation


@contextmanager
def lane_lock(locks_dir: Path, lane: str, wait_seconds: float = 0.0) -> Iterator[None]:
    locks_dir.mkdir(parents=True, exist_ok=True)
    path = locks_dir / f"{lane}.lock"
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_seconds
    try:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = path.read_text().strip() or "another process"
                    raise LaneViolation(f"the {lane} lane is busy ({holder}); retry when it is free") from None
                time.sleep(0.2)
        os.ftruncate(handle, 0)
        os.write(handle, f"pid {os.getpid()}".encode())
        yield
    finally:
        os.close(handle)
