"""Wake-ups of the API's event streams: a PUBLISH after a message is stored, one subscriber per
API process.

SQL stays the truth for what a stream sends; a wake-up only says "read SQL now". A writer
publishes on the session's channel (``Keys.events``) once its message row is committed, best
effort: a wake-up lost to a Redis outage (or to a subscriber that was reconnecting) is caught by
the stream's slow poll (HBGW_API_STREAM_POLL). The API process holds ONE pub/sub connection,
served by one thread (``StreamWaker``), subscribed to the channels of the streams open in that
process; each stream waits on an asyncio event (``Watch``) the thread sets through the stream's
event loop. When the connection is lost, the thread reconnects with back-off and, once it is
subscribed again, wakes every stream once: nothing waits a whole slow poll for a wake-up
published while it was away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterable
from typing import Any

import redis

from hbgw.state.connection import TRANSIENT_REDIS_ERRORS
from hbgw.state.keys import Keys

__all__ = ["StreamWaker", "Watch", "wake_streams"]

log = logging.getLogger("hbgw.stream_wake")

# Seconds the subscriber thread waits for a message before it applies new (un)subscriptions:
# a stream opened meanwhile is subscribed within this, and woken once it is (see ``_confirmed``).
TICK = 0.05
BACKOFF_FIRST, BACKOFF_CAP = 0.1, 5.0


def wake_streams(client: redis.Redis, keys: Keys, session_id: str) -> bool:
    """Tell the event streams of ``session_id`` to read SQL now; call it after the commit.
    False when Redis did not take it (logged): the streams' slow poll delivers it later."""
    try:
        client.publish(keys.events(session_id), "1")
    except TRANSIENT_REDIS_ERRORS as exc:
        log.info(
            "the event streams were not woken; their slow poll will deliver: %s",
            exc,
            extra={"action": "events.wake_failed", "session": session_id},
        )
        return False
    return True


class Watch:
    """One open stream's wake-up: an asyncio event set from the subscriber thread."""

    def __init__(self, waker: StreamWaker, session_id: str) -> None:
        self.session_id = session_id
        self._waker = waker
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        waker.add(self)

    def set(self) -> None:
        """Wake the stream; from any thread."""
        with contextlib.suppress(RuntimeError):  # its loop closed: the stream is gone
            self._loop.call_soon_threadsafe(self._event.set)

    def clear(self) -> None:
        """Before the stream reads SQL: a wake-up during the read is kept for the next wait."""
        self._event.clear()

    async def wait(self, timeout: float) -> bool:
        """Until woken or ``timeout`` seconds passed; True when woken."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), max(0.0, timeout))
            return True
        return False

    def move(self, session_id: str) -> None:
        """Follow the conversation to another session (a compression's child)."""
        self._waker.discard(self)
        self.session_id = session_id
        self._waker.add(self)

    def close(self) -> None:
        self._waker.discard(self)


class StreamWaker:
    """The API process's one subscriber: a thread holding one pub/sub connection, subscribed to
    the channels of the open streams, waking the matching ``Watch`` on every message."""

    def __init__(self, client: redis.Redis | None, keys: Keys) -> None:
        """``client``: its own (not shared), made with ``connect(..., retry=False)``: without
        redis-py's silent retry a lost connection reaches ``_run``, which reconnects and then
        wakes every stream (a silent reconnect would not). None (no Redis) leaves the streams
        to the slow poll, and ``wake_all`` still reaches them (a shutdown)."""
        self._client = client
        self._keys = keys
        self._lock = threading.Lock()
        self._watches: dict[str, set[Watch]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hbgw-stream-waker", daemon=True)
        self._lost = False
        self.reconnects = 0
        """Times the subscriber connected again after losing Redis (tests, metrics)."""

    def start(self) -> None:
        if self._client is not None and not self._thread.is_alive():
            self._thread.start()

    def stop(self) -> None:
        """End the thread and wake every stream (a shutdown ends them at once)."""
        self._stop.set()
        self.wake_all()
        if self._thread.is_alive():
            self._thread.join(5)

    def watch(self, session_id: str) -> Watch:
        """A wake-up for a stream of ``session_id`` (call it in the stream's event loop)."""
        return Watch(self, session_id)

    def add(self, watch: Watch) -> None:
        with self._lock:
            self._watches.setdefault(self._keys.events(watch.session_id), set()).add(watch)

    def discard(self, watch: Watch) -> None:
        channel = self._keys.events(watch.session_id)
        with self._lock:
            watches = self._watches.get(channel)
            if watches is not None:
                watches.discard(watch)
                if not watches:
                    del self._watches[channel]

    def wake_sessions(self, session_ids: Iterable[str]) -> None:
        """Wake the streams of these sessions here (the API's slow sweep found news)."""
        for sid in session_ids:
            self._wake(self._keys.events(sid))

    def wake_all(self) -> None:
        for watch in self._all():
            watch.set()

    def _all(self) -> list[Watch]:
        with self._lock:
            return [w for watches in self._watches.values() for w in watches]

    def _wake(self, channel: str) -> None:
        with self._lock:
            watches = list(self._watches.get(channel, ()))
        for watch in watches:
            watch.set()

    def _run(self) -> None:
        assert self._client is not None
        delay = BACKOFF_FIRST
        while not self._stop.is_set():
            pubsub = self._client.pubsub()  # type: ignore[no-untyped-call]
            try:
                self._serve(pubsub)
            except Exception as exc:
                # Redis away (or, a defect, anything else): the thread must outlive it, since
                # until it is back every stream waits for the slow sweep.
                if not self._lost:
                    delay = BACKOFF_FIRST
                    log.warning(
                        "event stream wake-ups lost Redis; streams poll SQL slowly until it is "
                        "back: %s",
                        exc,
                        exc_info=not isinstance(exc, (redis.RedisError, OSError)),
                        extra={"action": "events.waker_lost"},
                    )
                self._lost = True
                self._stop.wait(delay)
                delay = min(BACKOFF_CAP, delay * 2)
            finally:
                with contextlib.suppress(redis.RedisError, OSError):
                    pubsub.close()

    def _serve(self, pubsub: Any) -> None:
        """Subscribe to what is open, wake on messages; returns at stop, raises on Redis loss."""
        subscribed: set[str] = set()
        while not self._stop.is_set():
            subscribed = self._sync(pubsub, subscribed)
            if self._lost and subscribed:
                # Back after an outage: whatever was published meanwhile is unknown.
                self._lost = False
                self.reconnects += 1
                log.info("event stream wake-ups are back", extra={"action": "events.waker_back"})
                self.wake_all()
            message = pubsub.get_message(timeout=TICK)
            if message is not None:
                self._handle(message)

    def _sync(self, pubsub: Any, subscribed: set[str]) -> set[str]:
        """(Un)subscribe so that the connection follows the open streams."""
        with self._lock:
            wanted = set(self._watches)
        if wanted - subscribed:
            pubsub.subscribe(*sorted(wanted - subscribed))
        if subscribed - wanted:
            pubsub.unsubscribe(*sorted(subscribed - wanted))
        return wanted

    def _handle(self, message: dict[str, Any]) -> None:
        channel = message.get("channel")
        # "subscribe" wakes too: a stream read SQL before its channel was subscribed, and a
        # message stored in between was published to no one, so it reads once more.
        if message.get("type") in ("message", "subscribe") and isinstance(channel, str):
            self._wake(channel)
