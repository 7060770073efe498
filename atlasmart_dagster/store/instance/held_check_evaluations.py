"""Check evaluations a step reports, written to Dagster's event log as one transaction instead of one each.

Dagster batches a step's materializations of a range (``DAGSTER_EVENT_BATCH_SIZE``)
but stores every check evaluation alone: on the embedded SQLite instance three
transactions and a checkpoint each, on Postgres a new connection and three
commits each (about 35 ms). A 30-day range of the daily chain reports 360 of
them, a year 4,380.

``HeldCheckEvaluations`` is mixed into the project's event log storages
(``dagster_sqlite_adapter.py``, ``dagster_postgres_adapter.py``). Inside
``coalesced_check_evaluations`` (which ``Step.report_checks`` enters around what
it yields) the evaluations this thread stores are held and written together,
in the order they came, before anything else this thread stores or reads
through the event log, and when the scope ends. If that write fails the
evaluations are stored one by one, as Dagster does when a batch fails. Other
threads and processes store as before; they see the held evaluations a few
milliseconds later, when the step reaches its next event.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from dagster import DagsterEventType

# Held inside the scope; at most this many before they are written.
HELD_EVENT_TYPES = frozenset({DagsterEventType.ASSET_CHECK_EVALUATION})
HOLD_MAX = 1000


@contextmanager
def coalesced_check_evaluations(instance: Any) -> Iterator[None]:
    """Within: the check evaluations this thread stores on ``instance`` are written together.

    On an instance whose event log does not hold them (Dagster's own storages) this does nothing.
    """
    storage = getattr(instance, "event_log_storage", None)
    if not isinstance(storage, HeldCheckEvaluations):
        yield
        return
    with storage.coalescing():
        yield


class HeldCheckEvaluations:
    """Mixin for an event log storage; the storage defines ``_store_one`` and ``_store_together``.

    Its ``store_event`` calls ``_hold`` first (and returns if the event was held);
    its connections call ``_write_held`` before they are used.
    """

    def _init_held(self) -> None:
        # Per thread inside ``coalescing``: the evaluations it stored that are not yet written.
        self._held_evaluations: dict[int, list] = {}

    def _store_one(self, event) -> None:  # Dagster's own store_event
        raise NotImplementedError

    def _store_together(self, events: Sequence) -> None:  # all of them in one transaction, or none
        raise NotImplementedError

    @contextmanager
    def coalescing(self) -> Iterator[None]:
        """Hold the check evaluations this thread stores; write them together when the scope ends."""
        thread = threading.get_ident()
        if thread in self._held_evaluations:  # already inside: the outer scope writes them
            yield
            return
        self._held_evaluations[thread] = []
        try:
            yield
        finally:
            # The scope's own thread, even when the scope ends elsewhere (a generator closed by the
            # garbage collector in another thread): what it held is written, never dropped.
            try:
                self._write_held(thread)
            finally:
                del self._held_evaluations[thread]

    def _hold(self, event) -> bool:
        """Hold ``event`` if this thread is inside the scope and it is a check evaluation."""
        held = self._held_evaluations.get(threading.get_ident())
        if held is None or not (event.is_dagster_event and event.dagster_event_type in HELD_EVENT_TYPES):
            return False
        held.append(event)
        if len(held) >= HOLD_MAX:
            self._write_held()
        return True

    def _write_held(self, thread: int | None = None) -> None:
        """Write a thread's (default: this thread's) held evaluations in the order they came: together, or one by one."""
        held = self._held_evaluations.get(threading.get_ident() if thread is None else thread)
        if not held:
            return
        events = list(held)
        held.clear()
        if len(events) == 1:
            self._store_one(events[0])
            return
        try:
            self._store_together(events)
        except Exception:  # noqa: BLE001 - as Dagster does when a batch fails: store them one at a time
            for event in events:
                self._store_one(event)

    def _forget_held(self) -> None:
        """In a forked child: what the parent held is the parent's to write."""
        self._held_evaluations = {}
