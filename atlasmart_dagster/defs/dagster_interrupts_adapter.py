"""Adapter over Dagster's interrupt handling: a process that loads the code location stops on SIGTERM and SIGINT, even started in the background.

A command started with ``&`` by a non-interactive shell (a deploy script, an
entrypoint's ``sh -c``, ``ssh host 'cmd &'``) inherits SIGINT and SIGQUIT
ignored, as POSIX requires of a shell without job control. Python then leaves
SIGINT ignored instead of installing its KeyboardInterrupt handler, and
Dagster's ``setup_interrupt_handlers`` (``dagster api grpc``, ``execute_run``,
...) copies the SIGINT handler onto SIGTERM "for k8s": both are ignored, and
such a code server outlived a stop until SIGKILL (measured: over 90 s; a
SIGINT-handling one exits in ~3.5 s). Dagster also uses SIGINT as its own stop
channel: a run worker cancels its run by sending itself SIGINT, the run and
step launchers interrupt their children with it, and children inherit an
ignored signal across ``exec``; so an ignored SIGINT in the code server would
also make the runs it launches uncancellable.

So, only where a signal is ignored, SIGINT gets Python's default handler and
SIGTERM the SIGINT handler, exactly what Dagster sets up in a process that did
not inherit them ignored. A handler someone installed (Dagster's, Celery's,
ours in ``ops/runs/chains.py``) is never replaced, and nothing changes for a process
started in the foreground or by systemd or Kubernetes.

Doing it at import is not enough: Dagster imports the code location inside
``user_code_error_boundary``, which installs its own SIGINT handler for the
duration and then restores the one it found, SIG_IGN, and copies it onto
SIGTERM again (``_replace_interrupt_signal`` calls
``setup_interrupt_handlers``). So that restoring step is wrapped too: every
later restore of an ignored SIGINT restores Python's default handler instead.
"""

from __future__ import annotations

import signal
import threading

from dagster._utils import interrupts as _dagster_interrupts

_dagster_setup_interrupt_handlers = _dagster_interrupts.setup_interrupt_handlers


def stop_on_stop_signals() -> bool:
    """Un-ignore SIGINT and SIGTERM in this process; True if either was ignored."""
    if threading.current_thread() is not threading.main_thread():
        return False  # signal.signal works only in the main thread; Dagster loads code there
    changed = False
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        changed = True
    if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
        # Dagster's mapping (dagster._utils.interrupts.setup_interrupt_handlers):
        # SIGTERM is handled like SIGINT, so a stop is a KeyboardInterrupt and the
        # server shuts down as it does on Ctrl-C.
        on_interrupt = signal.getsignal(signal.SIGINT)
        if not callable(on_interrupt) and on_interrupt != signal.SIG_DFL:
            on_interrupt = signal.default_int_handler  # None: a handler set outside Python
        signal.signal(signal.SIGTERM, on_interrupt)
        changed = True
    return changed


def _setup_interrupt_handlers_not_ignoring() -> None:
    if threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    _dagster_setup_interrupt_handlers()  # SIGTERM := the SIGINT handler


def install() -> None:
    """Un-ignore the stop signals now and whenever Dagster later restores an ignored SIGINT."""
    if getattr(_dagster_interrupts.setup_interrupt_handlers, "__module__", None) != __name__:
        _dagster_interrupts.setup_interrupt_handlers = _setup_interrupt_handlers_not_ignoring
    stop_on_stop_signals()
