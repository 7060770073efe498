"""Retry policy and error classification for steps that touch storage.

The policy retries with exponential backoff and jitter, so two lanes that
collided on a commit do not collide again in lock-step, and its retries span
the storage retry window (``ATLASMART_STORAGE_RETRY_WINDOW``, seconds, 60 by
default): an object store or database that restarts within it (a gateway
restart takes 30-60 s) costs a run some retries, not the run. The delays are
1, 3, 7, 15, 31, 63 s (each plus or minus 1 s): the smallest number of
retries whose shortest waits add up to the window. Read when the code location
loads, because a retry policy is part of the assets' definitions. ``classified`` turns
every error a step raises into the right Dagster outcome: transient errors
propagate (the policy retries them), everything else becomes
``Failure(allow_retries=False)`` and fails the step at once.
"""

from __future__ import annotations

import functools
import inspect
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import dagster as dg

from ..errors import PermanentError, SourceNotReady, is_transient
from ..settings import Settings, current

STORAGE_RETRY_WINDOW_ENV = Settings.storage_retry_window.name
RETRY_BASE_DELAY = 1.0


def storage_retry_window() -> float:
    """The seconds a step's retries must span, from ``$ATLASMART_STORAGE_RETRY_WINDOW`` (0 to 3600; 0: no retries)."""
    return current().storage_retry_window


def storage_retry_policy(window: float | None = None) -> dg.RetryPolicy:
    """Exponential backoff with jitter, with as many retries as it takes for the shortest waits to span ``window``."""
    window = storage_retry_window() if window is None else window
    retries, spanned = 0, 0.0
    while spanned < window:
        retries += 1
        # Dagster's exponential delay of retry k is (2**k - 1) * delay, its jitter at most ``delay`` either way.
        spanned += ((2**retries) - 1) * RETRY_BASE_DELAY - RETRY_BASE_DELAY
    return dg.RetryPolicy(
        max_retries=retries,
        delay=RETRY_BASE_DELAY,
        backoff=dg.Backoff.EXPONENTIAL,
        jitter=dg.Jitter.PLUS_MINUS,
    )


STORAGE_RETRY_POLICY = storage_retry_policy()

F = TypeVar("F", bound=Callable)


def classified(fn: F) -> F:
    """Decorate an asset or check body so its failures are classified (see module doc).

    A generator body (one that yields its results) stays a generator, so
    Dagster still sees one and errors raised while it runs are classified too.
    """
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator(*args, **kwargs):
            with _classifying():
                yield from fn(*args, **kwargs)

        return generator  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _classifying():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@contextmanager
def _classifying() -> Iterator[None]:
    try:
        yield
    except dg.Failure:
        raise
    except PermanentError as exc:
        metadata = {"error_kind": exc.kind, "retryable": False}
        if isinstance(exc, SourceNotReady):
            metadata["partition"] = exc.partition
            metadata["problems"] = dg.MetadataValue.json(exc.problems)
        raise dg.Failure(description=str(exc), metadata=metadata, allow_retries=False) from exc
    except Exception as exc:
        if is_transient(exc):
            raise
        raise dg.Failure(
            description=f"unclassified error, not retried: {type(exc).__name__}: {exc}",
            metadata={"error_kind": "unclassified", "retryable": False},
            allow_retries=False,
        ) from exc
