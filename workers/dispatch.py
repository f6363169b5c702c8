"""Publishing work to the queue of the worker that owns it."""

from __future__ import annotations

from typing import Any, Protocol

from hbgw.keys import Keys

FIRE_TASK = "hbgw.fire_heartbeats"
DRAIN_TASK = "hbgw.drain_inbox"


class Publisher(Protocol):
    def send_task(self, name: str, args: Any = None, **options: Any) -> Any: ...


class Dispatcher:
    def __init__(self, app: Publisher, keys: Keys) -> None:
        self.app = app
        self.keys = keys

    def fires(self, worker: str, fires: list[tuple[str, int]]) -> None:
        """One message carrying every fire of this tick for one worker."""
        self.app.send_task(
            FIRE_TASK,
            args=[[[sid, due] for sid, due in fires]],
            queue=self.keys.worker_queue(worker),
        )

    def drain(self, worker: str, session_id: str) -> None:
        self.app.send_task(DRAIN_TASK, args=[session_id], queue=self.keys.worker_queue(worker))
