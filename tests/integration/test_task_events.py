"""HBGW_TASK_EVENTS: Celery's task events (Flower's task list) can be turned off, while the
workers' own heartbeat events still reach Flower so that it lists them.

A real worker on the real Redis runs a real fire; an event receiver on the app's broker sees
what the worker published.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.harness import Gateway, gateway_settings, wait_until


@contextmanager
def received_events(gw: Gateway) -> Iterator[list[str]]:
    """The types of the events published on the app's broker while the block runs."""
    seen: list[str] = []
    stop = threading.Event()

    def listen() -> None:
        with gw.app.connection_for_read() as conn:
            receiver = gw.app.events.Receiver(
                conn, handlers={"*": lambda e: seen.append(e["type"])}
            )
            ready.set()
            for _ in receiver.itercapture(limit=None, timeout=0.5, wakeup=False):
                if stop.is_set():
                    return

    ready = threading.Event()

    def capture() -> None:
        while not stop.is_set():
            try:
                listen()
            except TimeoutError:  # no event within the timeout: look at ``stop`` again
                continue

    thread = threading.Thread(target=capture, daemon=True)
    thread.start()
    assert ready.wait(20), "the event receiver did not start"
    try:
        yield seen
    finally:
        stop.set()
        thread.join(10)


def _fire_once(gw: Gateway, seen: list[str]) -> None:
    with gw.worker("w1", heartbeat_events=True):
        sid = gw.session()
        gw.due_now(sid)
        gw.tick()
        gw.final_runs(sid)
        # A worker heartbeat after the run ended: every event of the task was published by then.
        after = len(seen)
        wait_until(lambda: "worker-heartbeat" in seen[after:], 20, "a worker heartbeat event")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("task_events", [True, False])
def test_task_events_follow_the_setting(
    tmp_path: Path, redis_url: str, redis_ns: str, task_events: bool
) -> None:
    settings: Any = gateway_settings(
        tmp_path, redis_url, redis_ns, agent="echo", task_events=task_events
    )
    gw = Gateway(settings, redis_url)
    try:
        with received_events(gw) as seen:
            _fire_once(gw, seen)
        task_types = {t for t in seen if t.startswith("task-")}
        if task_events:
            assert {"task-received", "task-succeeded"} <= task_types
        else:
            assert task_types == set()
        assert "worker-heartbeat" in seen  # Flower still lists the worker
    finally:
        gw.close()
