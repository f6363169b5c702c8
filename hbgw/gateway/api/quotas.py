"""The API's own limits: open event streams per owner (HBGW_API_MAX_STREAMS_PER_OWNER) and the
per-session message rate (HBGW_API_MESSAGES_PER_MINUTE), each refused with 429 and a sentence
naming its setting.

The quotas of sessions, heartbeats and cron jobs are not here: the store keeps them for every
path (``sessions/quotas.py``), and the API answers their ``QuotaExceeded`` with 429. Open event
streams are counted in this process (per API replica): a replica that dies takes its streams
and their count with it. The message rate is a fixed one-minute window in Redis, INCR then
PEXPIRE on the first message, so every replica shares one count and Redis' own clock ends the
window; when Redis is away, messages are not rate limited (SQL still takes them, as without
Redis at all).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable

from hbgw.gateway.api.auth import Principal
from hbgw.gateway.api.errors import ApiError
from hbgw.state.connection import TRANSIENT_REDIS_ERRORS
from hbgw.state.redis_part import RedisPart

log = logging.getLogger("hbgw.api")

WINDOW_MS = 60_000


def check_message_rate(redis: RedisPart | None, session_id: str, per_minute: int) -> None:
    """Count one message of the session; over the rate, 429 with the seconds left."""
    if not per_minute or redis is None:
        return
    key = redis.keys.message_rate(session_id)
    try:
        # One transaction: the window starts (with its expiry) if none is open, then counts.
        pipe = redis.client.pipeline(transaction=True)
        pipe.set(key, 0, px=WINDOW_MS, nx=True)
        pipe.incr(key)
        pipe.pttl(key)
        _started, count, ttl = pipe.execute()
    except TRANSIENT_REDIS_ERRORS as exc:
        log.warning("message rate not checked: %s", exc, extra={"action": "api.rate_unchecked"})
        return
    if int(count) > per_minute:
        retry = max(1, math.ceil(int(ttl) / 1000))
        raise ApiError(
            429,
            "rate_limited",
            f"This session takes at most {per_minute} messages a minute "
            f"(HBGW_API_MESSAGES_PER_MINUTE); try again in {retry} s.",
            headers={"Retry-After": str(retry)},
        )


class StreamSlots:
    """Open event streams by owner, in this process."""

    def __init__(self) -> None:
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, who: Principal, limit: int) -> Callable[[], None]:
        """A slot for one stream, and its release (idempotent: the stream's end and the
        response's end both call it, whichever comes); 429 when the owner is at ``limit``."""
        owner = who.owner
        if who.admin or owner is None:
            return lambda: None
        with self._lock:
            count = self._open.get(owner, 0)
            if limit and count >= limit:
                raise ApiError(
                    429,
                    "quota_exceeded",
                    f"This owner already has {limit} event streams open, the most allowed "
                    "(HBGW_API_MAX_STREAMS_PER_OWNER); close one first.",
                    headers={"Retry-After": "5"},
                )
            self._open[owner] = count + 1
        released = threading.Event()

        def release() -> None:
            with self._lock:
                if released.is_set():
                    return
                released.set()
                self._open[owner] -= 1
                if not self._open[owner]:
                    del self._open[owner]

        return release
