"""Expected failures are one log line; a traceback is for the unexpected.

A Redis that is down, restarting, loading, full or failing over, a Celery publish that gave up
on its connection, and a ``StoreError`` (the store already turned the database's trouble into a
sentence) are what deployments meet every day: each is logged as one line naming the action,
the ids and the cause. Anything else is a defect and keeps its traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.exceptions import OperationalError as BrokerUnavailable

from hbgw.core.errors import StoreError
from hbgw.state.connection import TRANSIENT_REDIS_ERRORS

EXPECTED_FAILURES: tuple[type[Exception], ...] = (
    *TRANSIENT_REDIS_ERRORS,
    BrokerUnavailable,
    StoreError,
)


def is_expected(exc: BaseException) -> bool:
    return isinstance(exc, EXPECTED_FAILURES)


def log_failure(
    logger: logging.Logger, message: str, exc: BaseException, *, action: str, **ids: Any
) -> None:
    """``message: cause`` as one warning for an expected failure, an error with traceback
    otherwise; ``ids`` (session, fire_id, …) go into the record beside ``action``."""
    extra = {"action": action, **ids}
    if is_expected(exc):
        logger.warning("%s: %s: %s", message, type(exc).__name__, exc, extra=extra)
    else:
        logger.error("%s: %s", message, exc, exc_info=exc, extra=extra)
