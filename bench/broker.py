"""What beat published: the Celery messages waiting on a worker's queue, read off the broker
(the replicas benchmark counts them; tests read them through tests/support/broker.py)."""

from __future__ import annotations

from typing import Any

from hbgw.state.dispatch import FIRE_TASK


def take_messages(app: Any, queue: str) -> list[tuple[str, list[Any]]]:
    """(task name, args) of every message waiting on ``queue``, oldest first; removes them."""
    out: list[tuple[str, list[Any]]] = []
    with app.connection_for_read() as conn:
        simple = conn.SimpleQueue(queue)
        try:
            while True:
                try:
                    message = simple.get(block=False)
                except simple.Empty:
                    break
                args, _kwargs, _embed = message.decode()
                out.append((message.headers["task"], list(args)))
                message.ack()
        finally:
            simple.close()
    return out


def take_fires(app: Any, queue: str) -> list[tuple[str, int]]:
    """Every fire (session, due ms) published to ``queue``, in order; removes the messages."""
    fires: list[tuple[str, int]] = []
    for task, args in take_messages(app, queue):
        if task == FIRE_TASK:
            fires.extend((str(sid), int(due)) for sid, due in args[0])
    return fires
