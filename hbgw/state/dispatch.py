"""Publishing work to the queue of the worker that owns it, and what a Celery app carries.

The Celery app is assembled by the wiring in ``hbgw/``; beat's scheduler and the worker tasks
find their settings and turn handler through :func:`context_of` instead of untyped attributes
on the app.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from hbgw.core.errors import NotWired
from hbgw.core.settings import Settings
from hbgw.sessions.states import fire_id
from hbgw.state.consumer_progress import ConsumerProgress
from hbgw.state.keys import Keys

FIRE_TASK = "hbgw.fire_heartbeats"
DRAIN_TASK = "hbgw.drain_inbox"
# A batch can carry a worker's share of a million fires: its repr for monitors stays short.
ARGSREPR_FIRES = 20


class Publisher(Protocol):
    def send_task(self, name: str, args: Any = None, **options: Any) -> Any: ...


class TurnHandler(Protocol):
    """What the worker tasks call: the turn runner, handed in by the wiring."""

    def accept_fires(self, fires: list[tuple[str, int]]) -> list[str]: ...

    def drain(self, session_id: str) -> str: ...


@dataclass
class AppContext:
    settings: Settings
    handler: TurnHandler | None = None
    # A worker's consumer reports here; its registry heartbeat reads it (issue 15).
    consumer: ConsumerProgress = field(default_factory=ConsumerProgress)

    def turn_handler(self) -> TurnHandler:
        if self.handler is None:
            raise NotWired(
                "This Celery app has no turn runner attached: start workers with `hbgw worker`."
            )
        return self.handler


# Keyed weakly by the app object: an app that is dropped takes its context with it.
_CONTEXTS: weakref.WeakKeyDictionary[Any, AppContext] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def attach_context(app: Any, context: AppContext) -> None:
    with _LOCK:
        _CONTEXTS[app] = context


def context_of(app: Any) -> AppContext:
    with _LOCK:
        context = _CONTEXTS.get(app)
    if context is None:
        raise NotWired(
            "This Celery app was not built by heartbeat-gateway: start it with `hbgw worker` "
            "or `hbgw beat`."
        )
    return context


class Dispatcher:
    def __init__(self, app: Publisher, keys: Keys) -> None:
        self.app = app
        self.keys = keys
        # The producer of the batch open on this thread (``batch``); workers forward from many.
        self._local = threading.local()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Every message sent inside goes out together when it ends: on a Redis broker one
        pipeline (a tick's messages and their task-sent events: one round trip instead of one
        or two per worker); other brokers publish each at once. A failure discards what was
        not sent yet, as a failing publish lost the rest of the tick before: the claims come
        back after their lease. A publisher without producers (a test's) sends each at once."""
        acquire = getattr(self.app, "producer_or_acquire", None)
        if acquire is None or getattr(self._local, "producer", None) is not None:
            yield
            return
        with acquire() as producer, producer.batch():
            self._local.producer = producer
            try:
                yield
            finally:
                self._local.producer = None

    def waiting(self, workers: Iterable[str]) -> dict[str, int]:
        """Messages still in each worker's queue, not yet taken by its consumer, in one round
        trip; empty when the broker cannot tell cheaply (RabbitMQ, or outside ``batch``)."""
        producer = getattr(self._local, "producer", None)
        channel = getattr(producer, "channel", None)
        acquire = getattr(channel, "conn_or_acquire", None)
        names = list(workers)
        if acquire is None or not names:
            return {}
        # kombu's Redis channel: a list per queue, under the broker's key prefix (its client
        # adds it); the fires carry no priority, so they are all in the base list.
        with acquire() as client, client.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.llen(self.keys.worker_queue(name))
            sizes = pipe.execute()
        return {name: int(size) for name, size in zip(names, sizes, strict=True)}

    def fires(self, worker: str, fires: list[tuple[str, int]]) -> None:
        """One message carrying every fire of this tick for one worker.

        The payload stays ``[[session, due_ms], …]`` (queued messages outlive an upgrade; JSON
        writes the pairs as arrays). ``argsrepr`` only changes what monitors such as Flower
        show: the fire ids, the first ``ARGSREPR_FIRES`` of a big batch and how many more.
        """
        shown = [fire_id(sid, due) for sid, due in fires[:ARGSREPR_FIRES]]
        more = len(fires) - len(shown)
        self.app.send_task(
            FIRE_TASK,
            args=[fires],
            queue=self.keys.worker_queue(worker),
            argsrepr=f"fires={shown!r}" + (f" +{more} more" if more else ""),
            producer=getattr(self._local, "producer", None),
        )

    def drain(self, worker: str, session_id: str) -> None:
        self.app.send_task(
            DRAIN_TASK,
            args=[session_id],
            queue=self.keys.worker_queue(worker),
            argsrepr=f"session={session_id!r}",
            producer=getattr(self._local, "producer", None),
        )
