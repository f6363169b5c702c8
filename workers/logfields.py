"""The structured fields every log record of a turn carries (a formatter prints them), and how
a failure is reported: one line for what is expected to happen now and then, a traceback for
the rest."""

from __future__ import annotations

import logging

import redis

from core.errors import StaleFence, StoreError, TurnAborted
from sessions.faults import is_outage

log = logging.getLogger("hbgw.runner")

# Redis restarting, unreachable, full or read-only; the store down; a lock or fence lost.
_TRANSIENT = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    StoreError,
    StaleFence,
    TurnAborted,
)


def fields(action: str, session: str, fire_id: str | None = None) -> dict[str, str]:
    extra = {"action": action, "session": session}
    if fire_id is not None:
        extra["fire_id"] = fire_id
    return extra


def is_transient(error: BaseException) -> bool:
    return isinstance(error, _TRANSIENT) or is_outage(error)


def cause(error: BaseException) -> str:
    """The error in one line: its type and the first line of its message (SQL errors add the
    statement and its parameters on further lines)."""
    first = str(error).strip().splitlines()[:1]
    return f"{type(error).__name__}: {first[0]}" if first else type(error).__name__


def report(
    what: str, error: BaseException, action: str, session: str, fire_id: str | None = None
) -> None:
    """Log ``what`` failed: one warning line for a transient cause, else an error with its
    traceback."""
    extra = {**fields(action, session, fire_id), "cause": cause(error)}
    if is_transient(error):
        log.warning("%s: %s", what, cause(error), extra=extra)
    else:
        log.error("%s: %s", what, cause(error), exc_info=error, extra=extra)
