"""A model endpoint that answers every chat completion after a fixed delay, on loopback.

It stands in for a real OpenAI-compatible model (seconds per answer) and counts the calls it
holds at once: the figure a worker's concurrency is measured by. Asyncio, so the fake itself
holds any number of calls without a thread each.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI


@dataclass
class Calls:
    in_flight: int = 0
    most: int = 0
    done: int = 0


def slow_model(delay: float, calls: Calls) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete() -> dict[str, object]:
        calls.in_flight += 1  # one event loop: no lock needed
        calls.most = max(calls.most, calls.in_flight)
        try:
            await asyncio.sleep(delay)
        finally:
            calls.in_flight -= 1
            calls.done += 1
        return {
            "id": "bench",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "bench-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "all quiet"},
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }

    return app


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(delay: float) -> Iterator[tuple[str, Calls]]:
    """The endpoint's base URL (``…/v1``) and its call counts, while inside."""
    calls = Calls()
    port = _free_port()
    config = uvicorn.Config(
        slow_model(delay, calls), host="127.0.0.1", port=port, log_level="warning", backlog=2048
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="bench-model", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("The fake model endpoint did not start.")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/v1", calls
    finally:
        server.should_exit = True
        thread.join(10)
