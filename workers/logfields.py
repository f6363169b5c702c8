"""The structured fields every log record of a turn carries (a formatter prints them), and how
a failure is reported: one line for what is expected to happen now and then, a traceback for
the rest."""

from __future__ import annotations

import logging

from hbgw.core.errors import StaleFence, TurnAborted
from hbgw.state.failures import is_expected

log = logging.getLogger("hbgw.runner")

# Besides what every layer expects (state.failures: Redis away or full, the broker gone, the
# store's StoreError), a turn expects to lose its lock or fence now and then.
_TURN_ENDINGS = (StaleFence, TurnAborted)


def fields(action: str, session: str, fire_id: str | None = None) -> dict[str, str]:
    extra = {"action": action, "session": session}
    if fire_id is not None:
        extra["fire_id"] = fire_id
    return extra


def is_transient(error: BaseException) -> bool:
    return isinstance(error, _TURN_ENDINGS) or is_expected(error)


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
