"""One asyncio loop for every model request of a process, bounded by HBGW_OPENAI_MAX_IN_FLIGHT.

A model answers in seconds. Issued from each turn's thread through the blocking client, every
request is a socket, an HTTP connection of the client's shared pool and a turn thread driving
them; the pool's lock is then taken by hundreds of threads at once, and a profile of 256 turns
due together found more turns waiting on that lock than on the model. Here the requests are
coroutines on one loop thread (``openai.AsyncOpenAI`` through the same base URL): the turn's
thread hands its request over and waits on a future, the loop holds the sockets, and a
semaphore bounds how many requests are out at once — more wait on the loop, not on the
endpoint.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class AsyncClient(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=AsyncClient)

# Seconds a worker's shutdown waits for the model client to close its connections.
CLOSE_TIMEOUT = 5.0

__all__ = ["ModelLoop"]


class ModelLoop(Generic[C]):
    """A daemon thread running an asyncio loop and the async client that lives on it; ``call``
    runs one request there and waits for it.

    Started on the first call, so an agent that is built and never asked (``hbgw up``'s
    configuration check) starts no thread. The client is made with its loop (its connections
    belong to that loop) and closed with it.
    """

    def __init__(self, open_client: Callable[[], C], max_in_flight: int) -> None:
        self.open_client = open_client
        self.max_in_flight = max_in_flight
        self._started = threading.Lock()
        self._running: _Running[C] | None = None

    def call(self, request: Callable[[C], Awaitable[T]]) -> T:
        """``request(client)``'s result, awaited on the loop within the bound; its exception
        as raised. ``request`` is called on the loop, so its awaitable is made where it runs."""
        running = self._start()
        future: Future[T] = asyncio.run_coroutine_threadsafe(running.bounded(request), running.loop)
        return future.result()

    def close(self, *, wait: bool = True) -> None:
        """Close the client, then stop the loop (its thread ends); a later call starts anew.
        ``wait=False``: from anywhere (a finalizer, the loop itself), without blocking."""
        with self._started:
            running, self._running = self._running, None
        if running is None:
            return
        loop = running.loop
        closed = asyncio.run_coroutine_threadsafe(running.client.close(), loop)
        # Stopped once the close is done: a stop from inside it would leave its future unset.
        closed.add_done_callback(lambda _: loop.call_soon_threadsafe(loop.stop))
        if wait:
            closed.result(timeout=CLOSE_TIMEOUT)

    def _start(self) -> _Running[C]:
        with self._started:
            if self._running is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                threading.Thread(
                    target=_serve, args=(loop, ready), name="hbgw-model-loop", daemon=True
                ).start()
                ready.wait()
                self._running = _Running(loop, self.open_client(), self.max_in_flight)
            return self._running


class _Running(Generic[C]):
    def __init__(self, loop: asyncio.AbstractEventLoop, client: C, max_in_flight: int) -> None:
        self.loop = loop
        self.client = client
        # An asyncio primitive binds to the loop it is first used on: this one's.
        self.slots = asyncio.Semaphore(max_in_flight)

    async def bounded(self, request: Callable[[C], Awaitable[T]]) -> T:
        async with self.slots:
            return await request(self.client)


def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    try:
        loop.run_forever()
    finally:
        loop.close()
