"""Retry policy and error classification for steps that touch storage.

The policy retries with exponential backoff and jitter, so two lanes that
collided on a commit do not collide again in lock-step. ``classified`` turns
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

STORAGE_RETRY_POLICY = dg.RetryPolicy(
    max_retries=3,
    delay=0.5,
    backoff=dg.Backoff.EXPONENTIAL,
    jitter=dg.Jitter.PLUS_MINUS,
)

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
