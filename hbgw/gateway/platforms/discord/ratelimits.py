"""Discord's rate-limit buckets, as its REST answers describe them.

Every answer names its bucket (``X-RateLimit-Bucket``), how many requests it has left
(``X-RateLimit-Remaining``) and when it refills (``X-RateLimit-Reset-After``, seconds). A bucket
is per route and per its major parameter (the channel, the webhook): one channel's exhausted
bucket holds no other channel's messages. When a bucket is at 0, the next request on it waits
until it refills — at most ``max_wait`` seconds (a send holds its turn); a longer wait is not
taken, the request fails transient instead, without being sent.

The state is this process's (each worker learns its own buckets from its own answers): Discord
counts per bot token, so several workers can still meet a 429, which ``rest.py`` waits out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from hbgw.core.errors import TransientDelivery

PLATFORM = "discord"


class Buckets:
    def __init__(
        self, *, max_wait: float, sleep: Callable[[float], None], monotonic: Callable[[], float]
    ) -> None:
        self.max_wait = max_wait
        self.sleep = sleep
        self.monotonic = monotonic
        self.lock = threading.Lock()
        self.bucket_of: dict[str, str] = {}  # route → Discord's bucket id
        self.empty_until: dict[tuple[str, str], float] = {}  # (bucket, major) → refill time

    def wait_for(
        self,
        route: str,
        major: str,
        *,
        patient: bool = True,
        guard: Callable[[], None] | None = None,
    ) -> bool:
        """Wait until the bucket of ``route`` for ``major`` has a request left; False when it
        is empty and ``patient`` is off (the caller skips the request)."""
        with self.lock:
            key = (self.bucket_of.get(route, route), major)
            refill = self.empty_until.get(key)
        if refill is None:
            return True
        delay = refill - self.monotonic()
        if delay <= 0:
            return True
        if not patient:
            return False
        if delay > self.max_wait:
            raise TransientDelivery(
                f"Discord's rate limit for this channel refills in {delay:.0f} s, longer than a "
                "send may wait; it can be sent later.",
                platform=PLATFORM,
                reason="ratelimited",
            )
        self.sleep(delay)
        if guard is not None:
            guard()  # the lock may have moved on while this waited
        return True

    def learn(self, route: str, major: str, headers: Mapping[str, str]) -> None:
        """Remember what an answer said about its bucket."""
        bucket = headers.get("x-ratelimit-bucket")
        remaining = headers.get("x-ratelimit-remaining")
        reset_after = _seconds(headers.get("x-ratelimit-reset-after"))
        with self.lock:
            if bucket:
                self.bucket_of[route] = bucket
            key = (self.bucket_of.get(route, route), major)
            if remaining == "0" and reset_after is not None:
                self.empty_until[key] = self.monotonic() + reset_after
            elif remaining is not None:
                self.empty_until.pop(key, None)


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < 86400 else None
