"""A model endpoint that answers every chat completion after a fixed delay, on loopback.

It stands in for a real OpenAI-compatible model (seconds per answer) and counts the calls it
holds at once: the figure a worker's concurrency is measured by. Asyncio, so the fake itself
holds any number of calls without a thread each.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fastapi import FastAPI

from bench.serving import serving_app


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


@contextmanager
def serving(delay: float) -> Iterator[tuple[str, Calls]]:
    """The endpoint's base URL (``…/v1``) and its call counts, while inside."""
    calls = Calls()
    with serving_app(slow_model(delay, calls), "the fake model endpoint") as url:
        yield f"{url}/v1", calls
