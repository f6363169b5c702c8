"""The worker's Celery consumer: a broker error is waited out, never a reason to exit.

Celery restarts its consumer after a *connection* error but treats any other Redis error as
unrecoverable: a full Redis (``OutOfMemoryError`` under ``noeviction``) stopped every worker
for good. ``broker_channel_error_retry`` (set in ``celery_app``) makes those recoverable too;
this consumer adds what Celery's restart lacks: a bounded exponential back-off between
attempts and one log line per attempt, without a traceback (``HBGW_DEBUG=1`` adds it).

Issue 15: the hook after a lost connection must still run Celery's own cleanup, which closes
the broken connection. Skipped, every channel of it stayed open and its socket stayed
registered in the worker's event loop; at the next Redis restart those sockets read EOF and
killed each new consumer ~30 ms after "Connected", for longer each time.

A task still running when the connection was lost settles (acks or rejects) its message after
the next consumer started, on the channel of the lost connection, which Celery's cleanup emptied:
kombu raised ``AttributeError`` from the event loop and Celery stopped the worker ("Unrecoverable
error"; issue 15, found by the chaos runs). That settle is dropped with a log line instead: the
message can no longer be acked on the channel it came on, the broker redelivers it once its
visibility timeout passes (never, when Redis came back empty), and the fire ledger and the inbox
refuse a turn that already ran.

The consumer also reports its progress to the app's ``ConsumerProgress``
(``context_of(app).consumer``): the registry heartbeat refreshes the worker's entry only while
the consumer is connected and its event loop turns, so a worker that cannot consume drops out
of the live set and beat routes its sessions to others.
"""

from __future__ import annotations

import functools
import logging
import os
import time
import warnings
from typing import Any

from celery.exceptions import CPendingDeprecationWarning
from celery.worker.consumer import Consumer

from hbgw.core.clock import pause
from hbgw.state.dispatch import context_of

log = logging.getLogger("hbgw.worker")

FIRST_DELAY = 0.5
MAX_DELAY = 10.0
# A consumer that ran this long without an error starts its back-off over.
HEALTHY_AFTER = 60.0
# Longest wait between two connect attempts while the broker refuses connections.
RECONNECT_MAX = 2.0


class ResilientConsumer(Consumer):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._delay = FIRST_DELAY
        self._last_error = 0.0
        self._connected_since_error = False
        self._progress = context_of(self.app).consumer

    def connect(self) -> Any:
        connection = super().connect()
        # The broker answered: an error after this is not the outage going on.
        self._connected_since_error = True
        if self.hub is not None:
            self.hub.on_tick.add(self._loop_passed)  # a set: added once however often
        self._progress.connected(time.monotonic(), ticks=self.hub is not None)
        return connection

    def ensure_connected(self, conn: Any) -> Any:
        # Celery retries a refused connect after 2, 4, 6 ... up to 30 s: a Redis back after a
        # long outage waited up to that long for the consumer. A refused connect is cheap;
        # try every RECONNECT_MAX seconds at most (each attempt is one log line).
        conn.ensure_connection = functools.partial(
            conn.ensure_connection,
            interval_start=FIRST_DELAY,
            interval_step=FIRST_DELAY,
            interval_max=RECONNECT_MAX,
        )
        return super().ensure_connected(conn)

    def call_soon_ack(self, p: Any, *args: Any, **kwargs: Any) -> Any:
        return super().call_soon_ack(_settle_unless_lost, p, *args, **kwargs)

    def _loop_passed(self) -> None:
        self._progress.passed(time.monotonic())

    def on_connection_error_before_connected(self, exc: BaseException) -> None:
        self._progress.lost()
        self._back_off(exc)

    def on_connection_error_after_connected(self, exc: BaseException) -> None:
        self._progress.lost()
        # Celery's cleanup: it closes the broken connection and every channel of it.
        with warnings.catch_warnings():
            # Its multi-line notice that Celery 6 may cancel running tasks on a connection loss,
            # once per loss. Our tasks only hand work to the turn runner (milliseconds), and the
            # threads pool cannot cancel one: that setting stays off and the notice is noise.
            warnings.simplefilter("ignore", CPendingDeprecationWarning)
            try:
                super().on_connection_error_after_connected(exc)
            except AttributeError as cleanup:
                # kombu, closing the default channel after Celery's collect() let go of its
                # transport, tries to give back unacked messages with no connection info left
                # (``'NoneType' object has no attribute 'hostname'``). The sockets are released
                # already; the unacked messages come back by the visibility timeout. Celery
                # would call that unrecoverable and stop the worker.
                log.info(
                    "broker cleanup after a lost connection ended early: %s",
                    cleanup,
                    extra={"action": "worker.broker_cleanup"},
                )
                self.connection = None
        self._back_off(exc)

    def _back_off(self, exc: BaseException) -> None:
        now = time.monotonic()
        # A connection lost after the broker accepted us since the last error is not the outage
        # going on (a restart, a leftover connection): restart soon. A Redis error on a good
        # connection (full: OOM) right after a connect is, and keeps backing off.
        lost_after_connect = self._connected_since_error and isinstance(
            exc, tuple(self.connection_errors)
        )
        if now - self._last_error > HEALTHY_AFTER or lost_after_connect:
            self._delay = FIRST_DELAY
        self._connected_since_error = False
        log.warning(
            "broker error, consumer restarts in %.1fs: %s: %s",
            self._delay,
            type(exc).__name__,
            exc,
            extra={"action": "worker.broker_retry"},
            exc_info=exc if os.environ.get("HBGW_DEBUG") else None,
        )
        # Interruptible: Celery's SIGTERM handler raises in the main thread, ending the wait.
        pause(self._delay)
        self._last_error = time.monotonic()
        self._delay = min(self._delay * 2, MAX_DELAY)


def _settle_unless_lost(settle: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a message's ack or reject; dropped when its channel's connection is gone."""
    try:
        return settle(*args, **kwargs)
    except AttributeError as exc:
        # kombu's Redis channel looks its connection info up on the transport that Celery's
        # cleanup let go of: ``'NoneType' object has no attribute 'hostname'``.
        message = getattr(settle, "__self__", None)
        log.info(
            "a message of a lost broker connection was not settled (%s: %s); the broker "
            "redelivers it after its visibility timeout and a repeat is refused",
            getattr(settle, "__name__", "settle"),
            exc,
            extra={
                "action": "worker.stale_ack",
                "delivery_tag": getattr(message, "delivery_tag", None),
            },
        )
        return None
