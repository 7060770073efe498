"""One gateway query in a process of its own, so that its memory and time limits hold for every query shape.

DuckDB's ``memory_limit`` governs the engine's buffer manager, not every
allocation: a value built inside one vector (``repeat('x', 1500000000)``,
``generate_series(1, 300000000)``, a list, the strings of a CROSS JOIN) is
allocated beside it, and such queries grew to 3 GB, 14.8 GB and the kernel's
OOM killer under a 256 MB limit. The operating system's limit holds for all
of them, so each query runs in a child process that limits itself:

- **fork**, from the gateway's process once the granted relations are loaded:
  the child starts with DuckDB and pyarrow imported and the authorised Arrow
  tables in memory (shared copy-on-write, nothing serialised or re-read) and
  opens its own engine on them. No DuckDB connection crosses the fork: the
  child never touches one of the parent's, and it takes no lock another
  thread of the parent could hold (no imports, no logging, no storage).
- **RLIMIT_DATA**, set in the child once its engine is open and before the
  statement is read: from there the child's private writable memory may grow
  by ``allowed_growth(limit)`` = 1.25 x the limit + 64 MiB, whatever the
  parent held when it forked. DuckDB keeps its buffer pool to its
  ``memory_limit`` (the same limit) but allocates around it too: a hash
  aggregate that fits a 1 GB limit grew the data segment by ~1.2 GB, one that
  fits 256 MB by ~330 MB; with less headroom such queries were refused, and
  with very little DuckDB sometimes crashed instead of raising. ``RLIMIT_AS``
  would hold too, but it counts address space DuckDB reserves and never fills
  (~670 MB when a connection opens with 2 threads, more with more threads),
  so its figure would depend on the machine; the data segment is what a
  query fills.
- The result comes back over a pipe as an Arrow IPC stream, batch by batch;
  the parent counts it against the memory limit as it arrives (the result
  lives in the parent).
- The time limit is a timer in the parent that kills the child (SIGKILL): a
  query stops at its limit whatever the engine is doing, even inside one
  value DuckDB would not interrupt. The child dies with its parent
  (``PR_SET_PDEATHSIG``), so a killed command leaves no query running.

Linux only (``/proc/self/status``, ``prctl``), as the rest of the platform.
Measured here (DuckDB 2.0, 2 cores, from a process holding ~180 MB): the fork
~3 ms, the child's engine ~18 ms (~12 ms without the fork: its first writes
copy pages it shares with the parent), its exit and reaping ~6 ms; ~20 ms per
query in all, against ~0.9 s for an ``atlasmart query`` command.
"""

from __future__ import annotations

import ctypes
import faulthandler
import gc
import json
import os
import resource
import signal
import sys
import threading
from typing import Callable

import duckdb
import pyarrow as pa
import pyarrow.ipc  # noqa: F401  (imported here: the child must not import anything)

# Beyond the memory limit, the share of it and the fixed slack a query's data segment may
# grow by: DuckDB's allocations around its buffer pool (see the module's docstring).
HEADROOM_SHARE = 0.25
HEADROOM_BYTES = 64 * 2**20
MESSAGE_CHARS = 2000  # of a DuckDB error the child passes on; their first line is what users see
_MEMORY_ERRORS = (duckdb.OutOfMemoryException, MemoryError, pa.ArrowMemoryError)
_DUCKDB_OUT_OF_MEMORY = "Out of Memory Error:"
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the child must not load anything
_FORKING = threading.Lock()


class EngineTimedOut(Exception):
    """The query ran past its time limit; its process was killed."""


class EngineOverMemory(Exception):
    """The query, its values or its result needed more than the memory limit."""


class EngineFailed(Exception):
    """The engine process failed in a way no DuckDB error describes; ``str()`` is its kind, for the log.

    ``signal`` names the signal that ended it, if one did: under the memory limit
    that is most likely an allocation DuckDB did not expect to fail.
    """

    def __init__(self, kind: str, signal_name: str | None = None):
        super().__init__(kind)
        self.signal = signal_name


def run_in_child(
    open_engine: Callable[[], duckdb.DuckDBPyConnection],
    sql: str,
    *,
    memory_bytes: int,
    timeout_s: float,
    batch_rows: int,
) -> pa.Table:
    """Run ``sql`` on the engine ``open_engine`` builds, in a forked child held to ``memory_bytes`` and ``timeout_s``.

    A DuckDB error in the child is raised here as the same DuckDB exception
    with the same text; a limit as ``EngineTimedOut`` or ``EngineOverMemory``.
    """
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # or the child's copy of the buffer could be written twice
    parent = os.getpid()
    with _FORKING:  # a child forked for another thread's query must not hold this query's pipes open
        data_r, data_w = os.pipe()
        status_r, status_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(data_r)
            os.close(status_r)
            _child(parent, open_engine, sql, memory_bytes, batch_rows, data_w, status_w)
        os.close(data_w)
        os.close(status_w)

    stopped = threading.Event()

    def stop() -> None:
        stopped.set()
        os.kill(pid, signal.SIGKILL)

    timer = threading.Timer(timeout_s, stop)
    timer.daemon = True
    timer.start()
    try:
        with os.fdopen(data_r, "rb") as source:
            schema, batches, over_memory = _receive(source, memory_bytes)
        if over_memory:
            os.kill(pid, signal.SIGKILL)
        with os.fdopen(status_r, "rb") as status_pipe:
            word = status_pipe.read()
    finally:
        # Also on Ctrl-C: the child never outlives the query, and is killed only
        # before it is reaped (after that its pid could be another process's).
        timer.cancel()
        timer.join()
        if not stopped.is_set():
            os.kill(pid, signal.SIGKILL)
        _, wait_status = os.waitpid(pid, 0)

    if stopped.is_set():
        raise EngineTimedOut()
    if over_memory:
        raise EngineOverMemory()
    if not word:
        # Died without a word: SIGKILL is the kernel's OOM killer (nobody else kills it);
        # anything else is an engine failure.
        if os.WIFSIGNALED(wait_status) and os.WTERMSIG(wait_status) == signal.SIGKILL:
            raise EngineOverMemory()
        if os.WIFSIGNALED(wait_status) and os.WTERMSIG(wait_status) in (signal.SIGINT, signal.SIGTERM):
            # Only a terminal's Ctrl-C to the process group (or a SIGTERM to it) sends these: the command
            # was interrupted, whichever of the two processes noticed first.
            raise KeyboardInterrupt
        if os.WIFSIGNALED(wait_status):
            name = signal.Signals(os.WTERMSIG(wait_status)).name
            raise EngineFailed(f"engine process ended by {name}", name)
        raise EngineFailed(f"engine process exited with {os.waitstatus_to_exitcode(wait_status)}")
    status = json.loads(word)
    if status["outcome"] == "ok":
        return pa.Table.from_batches(batches, schema=schema)
    if status["outcome"] == "memory":
        raise EngineOverMemory()
    error = getattr(duckdb, status["class"], None)
    if status["outcome"] == "duckdb" and isinstance(error, type) and issubclass(error, duckdb.Error):
        raise error(status["message"])
    raise EngineFailed(f"{status['class']} in the engine process")


def _receive(source, memory_bytes: int) -> tuple[pa.Schema | None, list[pa.RecordBatch], bool]:
    """The result's schema and batches as the child streams them; True if they outgrew ``memory_bytes``."""
    schema, batches, size = None, [], 0
    try:
        reader = pa.ipc.open_stream(source)
        schema = reader.schema
        for batch in reader:
            size += batch.nbytes
            if size > memory_bytes:
                return schema, [], True
            batches.append(batch)
    except pa.ArrowException:
        pass  # no stream, or a cut one: the child failed or was killed, and its status says which
    return schema, batches, False


def _child(parent: int, open_engine, sql: str, memory_bytes: int, batch_rows: int, data_w: int,
           status_w: int) -> None:
    """The child's whole life: open the engine, limit itself, run, stream the result, say how it ended."""
    # The parent's timer is the time limit: if the parent is gone (killed), so is the query.
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(0)
    code = 0
    try:
        status = _run_limited(open_engine, sql, memory_bytes, batch_rows, data_w)
    except BaseException as exc:  # noqa: BLE001  (every ending is reported, none escapes the child)
        status = _outcome(exc)
    try:
        os.write(status_w, json.dumps(status).encode())
    except BaseException:  # noqa: BLE001
        code = 70
    os._exit(code)  # no atexit, no finalisers: the parent's state is the parent's


def _run_limited(open_engine, sql: str, memory_bytes: int, batch_rows: int, data_w: int) -> dict:
    # The child's output must never reach the user's terminal (a C++ abort message,
    # a traceback of the parent's faulthandler); Ctrl-C and a closed pipe end it.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    faulthandler.disable()
    gc.disable()  # a collection would touch (and copy) every page shared with the parent
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    with os.fdopen(data_w, "wb") as sink:
        con = open_engine()
        con.execute("SELECT 1").fetchall()  # the engine's threads and first allocations belong to the baseline
        _limit_data_segment(allowed_growth(memory_bytes))
        reader = con.sql(sql).to_arrow_reader(batch_rows)
        with pa.ipc.new_stream(sink, reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch)
    return {"outcome": "ok"}


def allowed_growth(memory_bytes: int) -> int:
    """How far a query's process may grow under a memory limit of ``memory_bytes`` before the OS refuses."""
    return int(memory_bytes * (1 + HEADROOM_SHARE)) + HEADROOM_BYTES


def _limit_data_segment(growth: int) -> None:
    """Let this process's data segment grow by ``growth`` bytes from now, and no more."""
    with open("/proc/self/status") as status:
        data_kb = next(int(line.split()[1]) for line in status if line.startswith("VmData:"))
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = data_kb * 1024 + growth
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _outcome(exc: BaseException) -> dict:
    # DuckDB's errors while a result streams reach Python as pyarrow's OSError, with DuckDB's text
    if isinstance(exc, _MEMORY_ERRORS) or str(exc).startswith(_DUCKDB_OUT_OF_MEMORY):
        return {"outcome": "memory"}
    if isinstance(exc, duckdb.Error):
        return {"outcome": "duckdb", "class": type(exc).__name__, "message": str(exc)[:MESSAGE_CHARS]}
    return {"outcome": "failed", "class": type(exc).__name__}
