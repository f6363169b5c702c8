"""Which worker owns a session: rendezvous hashing over the live workers.

Every worker refreshes its entry in a Redis sorted set every few seconds. A session belongs to
the live worker with the highest hash of (worker, session): when a worker dies, only its own
sessions move, and every process computes the same answer with no coordination.

A name is live while its entry is fresh, and two live workers never share one: a worker claims
its name at start (``claim_name``) and is refused while another process keeps that entry fresh.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence

import redis
from redis.client import Pipeline

from hbgw.core.clock import pause
from hbgw.core.errors import BadInput
from hbgw.core.metrics import gateway_metrics
from hbgw.state.beat_registry import names
from hbgw.state.connection import TRANSIENT_REDIS_ERRORS
from hbgw.state.keys import Keys
from hbgw.state.scripts import load_script

log = logging.getLogger("hbgw.registry")

CLAIM_RETRY_FIRST = 0.1  # seconds; doubled up to CLAIM_RETRY_MAX while Redis cannot take it
CLAIM_RETRY_MAX = 2.0


class Rendezvous:
    """The owner of any session over one list of live workers.

    A session's score with a worker is the 8-byte BLAKE2b digest of ``worker NUL session``; the
    highest score wins (the first worker listed on a tie). Every process computes it — beat to
    group fires, workers and the edge to check and forward — so this is the one definition.
    Each worker's prefix is encoded once here: beat asks for many sessions per tick.
    """

    __slots__ = ("_prefixes",)

    def __init__(self, workers: Sequence[str]) -> None:
        self._prefixes = [(worker, f"{worker}\x00".encode()) for worker in workers]

    def owner(self, session_id: str) -> str | None:
        data = session_id.encode()
        blake2b = hashlib.blake2b
        best, best_score = None, b""
        for worker, prefix in self._prefixes:
            score = blake2b(prefix + data, digest_size=8).digest()
            # Any digest beats b"": the first worker is taken, later ones only when higher.
            if score > best_score:
                best, best_score = worker, score
        return best


def rendezvous_owner(session_id: str, workers: Sequence[str]) -> str | None:
    return Rendezvous(workers).owner(session_id)


class WorkerRegistry:
    def __init__(self, client: redis.Redis, keys: Keys, *, ttl_ms: int) -> None:
        self.client = client
        self.keys = keys
        self.ttl_ms = ttl_ms
        self._claim = load_script(client, "hbgw.state", "lua/claim_worker.lua")

    def claim(self, worker: str, now_ms: int) -> int | None:
        """Register ``worker`` unless a live entry holds the name: None when registered, else
        that entry's last refresh (ms)."""
        reply = self._claim(keys=[self.keys.workers()], args=[worker, now_ms, self.ttl_ms])
        return None if int(reply[0]) == 1 else int(reply[1])

    def refresh(self, worker: str, now_ms: int) -> None:
        self.client.zadd(self.keys.workers(), {worker: now_ms})

    def remove(self, worker: str) -> None:
        self.client.zrem(self.keys.workers(), worker)

    def live(self, now_ms: int) -> list[str]:
        return names(self.client.zrangebyscore(self.keys.workers(), now_ms - self.ttl_ms, "+inf"))

    def queue_live(self, pipe: Pipeline, now_ms: int) -> None:
        """``live``'s read on a pipeline the caller runs with more; its answer through
        ``names`` (``hbgw/state/beat_registry.py``)."""
        pipe.zrangebyscore(self.keys.workers(), now_ms - self.ttl_ms, "+inf")

    def owner(self, session_id: str, now_ms: int) -> str | None:
        return rendezvous_owner(session_id, self.live(now_ms))


def claim_name(registry: WorkerRegistry, worker: str, clock_ms: Callable[[], int]) -> None:
    """Register ``worker`` at start, or raise BadInput while another live worker has the name.

    A fresh entry may be the last word of a worker that just crashed (a supervisor restarts it
    at once): the claim waits until the entry is either refreshed again — a live worker, refused
    — or old enough to be stale, at most one TTL.
    """
    deadline = time.monotonic() + registry.ttl_ms / 1000 + 1
    seen: int | None = None
    while (last := _claim_when_redis_answers(registry, worker, clock_ms)) is not None:
        if (seen is not None and last > seen) or time.monotonic() > deadline:
            raise BadInput(
                f"A worker named {worker!r} is already running (its registry entry is fresh) — "
                "give this one another name with --name."
            )
        seen = last
        pause(0.05)


def _claim_when_redis_answers(
    registry: WorkerRegistry, worker: str, clock_ms: Callable[[], int]
) -> int | None:
    """``registry.claim``, waiting out a Redis that is down, loading or full (one line, then
    a bounded back-off): a worker started against a full Redis starts once it has room."""
    delay = CLAIM_RETRY_FIRST
    while True:
        try:
            return registry.claim(worker, clock_ms())
        except TRANSIENT_REDIS_ERRORS as exc:
            if delay == CLAIM_RETRY_FIRST:
                log.warning(
                    "registry: cannot register %s yet (%s); retrying until Redis answers",
                    worker,
                    exc,
                    extra={"action": "registry.claim_retry"},
                )
            pause(delay)
            delay = min(delay * 2, CLAIM_RETRY_MAX)


class RegistryHeartbeat:
    """Refreshes a worker's registry entry from a daemon thread until stopped."""

    def __init__(
        self,
        registry: WorkerRegistry,
        worker: str,
        clock_ms: Callable[[], int],
        every: float,
        *,
        consuming: Callable[[], bool] | None = None,
    ) -> None:
        """``consuming``: whether the worker's consumer reads its queue now; while it says no,
        the entry is not refreshed and expires after the TTL (issue 15). None: always."""
        self.registry = registry
        self.worker = worker
        self.clock_ms = clock_ms
        self.every = every
        self.consuming = consuming
        self._withheld = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hbgw-registry", daemon=True)

    def start(self) -> None:
        # A Redis that fails now (full, restarting) must not stop the worker from starting:
        # the thread keeps refreshing, and the worker is live as soon as one refresh lands.
        self._refresh()
        self._thread.start()

    def stop(self, *, deregister: bool = True) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if not deregister:
            return
        try:
            self.registry.remove(self.worker)
        except TRANSIENT_REDIS_ERRORS as exc:
            # The entry expires after the worker TTL anyway.
            log.warning(
                "registry: could not deregister %s: %s",
                self.worker,
                exc,
                extra={"action": "registry.remove_failed"},
            )

    def _refresh(self) -> None:
        if not self._consumer_reads():
            return
        try:
            now_ms = self.clock_ms()
            self.registry.refresh(self.worker, now_ms)
            # One more read per refresh (every TTL/4), so each worker's /metrics says it too.
            gateway_metrics().live_workers.set(len(self.registry.live(now_ms)))
        except TRANSIENT_REDIS_ERRORS as exc:
            # One line per miss; the next refresh retries and the TTL tolerates a few misses.
            log.warning(
                "registry: refresh of %s failed, retrying in %.1fs: %s",
                self.worker,
                self.every,
                exc,
                extra={"action": "registry.refresh_failed"},
            )

    def _consumer_reads(self) -> bool:
        """False while the consumer cannot consume: a live entry would draw fires nobody
        takes. One line when the refreshes stop and one when they resume."""
        reads = self.consuming is None or self.consuming()
        if reads == self._withheld:
            self._withheld = not reads
            log.warning(
                "registry: %s %s",
                self.worker,
                "consumes again; refreshing its entry"
                if reads
                else "cannot consume; its entry is not refreshed and expires",
                extra={"action": "registry.consumer_up" if reads else "registry.consumer_down"},
            )
        return reads

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self._refresh()
            except Exception:
                # Unexpected (a bug, not Redis): say it loudly, but keep the worker registered.
                log.exception("registry: refresh crashed", extra={"action": "registry.error"})
