"""Retry policy and error classification for steps that touch storage.

The policy retries with exponential backoff and jitter, so two lanes that
collided on a commit do not collide again in lock-step. ``classified`` turns
every error a step raises into the right Dagster outcome: transient errors
propagate (the policy retries them), everything else becomes
``Failure(allow_retries=False)`` and fails the step at once.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

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
    """Decorate an asset or check body so its failures are classified (see module doc)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
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

    return wrapper  # type: ignore[return-value]
