"""The worker's Celery consumer: a broker error is waited out, never a reason to exit.

Celery restarts its consumer after a *connection* error but treats any other Redis error as
unrecoverable: a full Redis (``OutOfMemoryError`` under ``noeviction``) stopped every worker
for good. ``broker_channel_error_retry`` (set in ``celery_app``) makes those recoverable too;
this consumer adds what Celery's restart lacks: a bounded exponential back-off between
attempts and one log line per attempt, without a traceback.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery.worker.consumer import Consumer

log = logging.getLogger("hbgw.worker")

FIRST_DELAY = 0.5
MAX_DELAY = 10.0
# A consumer that ran this long without an error starts its back-off over.
HEALTHY_AFTER = 60.0


class ResilientConsumer(Consumer):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._delay = FIRST_DELAY
        self._last_error = 0.0

    def on_connection_error_before_connected(self, exc: BaseException) -> None:
        self._back_off(exc)

    def on_connection_error_after_connected(self, exc: BaseException) -> None:
        self._back_off(exc)

    def _back_off(self, exc: BaseException) -> None:
        now = time.monotonic()
        if now - self._last_error > HEALTHY_AFTER:
            self._delay = FIRST_DELAY
        log.warning(
            "broker error, consumer restarts in %.1fs: %s: %s",
            self._delay,
            type(exc).__name__,
            exc,
            extra={"action": "worker.broker_retry"},
        )
        # Interruptible: Celery's SIGTERM handler raises in the main thread, ending the wait.
        time.sleep(self._delay)
        self._last_error = time.monotonic()
        self._delay = min(self._delay * 2, MAX_DELAY)
