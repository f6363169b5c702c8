"""Publishing work to the queue of the worker that owns it, and what a Celery app carries.

The Celery app is assembled by the wiring in ``hbgw/``; beat's scheduler and the worker tasks
find their settings and turn handler through :func:`context_of` instead of untyped attributes
on the app.
"""

from __future__ import annotations

import threading
import weakref
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
        )

    def drain(self, worker: str, session_id: str) -> None:
        self.app.send_task(
            DRAIN_TASK,
            args=[session_id],
            queue=self.keys.worker_queue(worker),
            argsrepr=f"session={session_id!r}",
        )
