"""Stall alerts to HBGW_ALERT_WEBHOOK, sent off beat's tick by one sender thread.

The reconciler runs inside beat's tick; a webhook that never answered once held the tick for
the whole timeout of every alert (four alerts, 16 s, past HBGW_BEAT_TTL), so the beat looked
dead and dispatched nothing. The tick now only puts the alert in a bounded queue; one daemon
thread POSTs them, each with a bounded timeout. A full queue drops the alert, counted in
``hbgw_alerts_total{outcome="dropped"}`` and logged, so a dead webhook never grows beat's memory.

Each body is signed when HBGW_ALERT_WEBHOOK_SECRET is set: ``X-Hbgw-Signature: t=<unix>,v1=<hex>``
where ``hex`` is HMAC-SHA256 over ``<t>.<body>`` (the receiver recomputes it and rejects an old
``t``). The URL is never logged: it often carries a token (Slack, Teams).

Alerts connect only where outbound webhooks may (``core/outbound.py``): an address inside the
gateway's network is refused unless HBGW_WEBHOOK_ALLOW_NETWORKS names it; redirects are not
followed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from hbgw.core.errors import OutboundRefused
from hbgw.core.metrics import gateway_metrics
from hbgw.core.outbound import OutboundGuard
from hbgw.core.outbound_http import guarded_transport
from hbgw.state.failures import log_failure

log = logging.getLogger("hbgw.reconcile")

ALERT_TIMEOUT = 5.0
QUEUE_SIZE = 100
SIGNATURE_HEADER = "X-Hbgw-Signature"


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value for ``body`` sent at ``timestamp`` (unix seconds)."""
    message = str(timestamp).encode() + b"." + body
    digest = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


class AlertSender:
    def __init__(
        self,
        url: str,
        secret: str | None,
        guard: OutboundGuard,
        *,
        timeout: float = ALERT_TIMEOUT,
        size: int = QUEUE_SIZE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._url = url
        self._secret = secret
        self._guard = guard
        self._timeout = timeout
        self._clock = clock
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=size)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, payload: dict[str, Any]) -> bool:
        """Queue ``payload`` without waiting; False (counted, logged) when the queue is full."""
        self._ensure_thread()
        try:
            self._queue.put_nowait(payload)
        except queue.Full:
            gateway_metrics().alerts.labels("dropped").inc()
            log.warning(
                "liveness: alert dropped, %d alerts wait for the webhook already",
                self._queue.maxsize,
                extra={"action": "reconcile.alert_dropped", "session": payload.get("session")},
            )
            return False
        return True

    def flush(self, timeout: float) -> bool:
        """Wait until every queued alert was tried (tests, a clean stop); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._queue.all_tasks_done.wait(remaining)
        return True

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hbgw-alerts", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        transport = guarded_transport(self._guard)
        with httpx.Client(timeout=self._timeout, transport=transport) as client:
            while True:
                payload = self._queue.get()
                try:
                    self._send(client, payload)
                except Exception as exc:  # the sender outlives any one alert
                    log_failure(
                        log, "liveness: alert not sent", exc, action="reconcile.alert_failed"
                    )
                finally:
                    self._queue.task_done()

    def _send(self, client: httpx.Client, payload: dict[str, Any]) -> None:
        body = json.dumps(payload, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json"}
        if self._secret:
            headers[SIGNATURE_HEADER] = sign(self._secret, int(self._clock()), body)
        outcome = "sent"
        try:
            client.post(self._url, content=body, headers=headers).raise_for_status()
        except OutboundRefused as exc:
            outcome = "failed"
            log.warning(
                "liveness: alert webhook refused: %s",
                exc,
                extra={"action": "reconcile.alert_refused", "session": payload.get("session")},
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            outcome = "failed"
            # Only the kind of failure: the URL (in the exception's text too) may carry a token.
            status = getattr(getattr(exc, "response", None), "status_code", None)
            log.warning(
                "liveness: alert webhook failed: %s%s",
                type(exc).__name__,
                f" (HTTP {status})" if status else "",
                extra={"action": "reconcile.alert_failed", "session": payload.get("session")},
            )
        gateway_metrics().alerts.labels(outcome).inc()
