"""A fake OpenAI-compatible endpoint that holds every chat completion until the test lets go.

It counts the calls it holds at once (``in_flight``, ``most``): a worker's concurrency is seen
where it matters, at the endpoint. Asyncio, so the fake itself holds any number of calls on one
loop. Serve ``app()`` with ``support.http_server.serving``; the base URL is ``<url>/v1``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI

POLL = 0.01  # seconds between a held call's looks at the release


@dataclass
class HeldModel:
    in_flight: int = 0
    most: int = 0
    answered: int = 0
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def completions() -> dict[str, Any]:
            self.in_flight += 1  # one event loop: no lock needed
            self.most = max(self.most, self.in_flight)
            try:
                while not self.released.is_set():
                    await asyncio.sleep(POLL)
            finally:
                self.in_flight -= 1
            self.answered += 1
            return completion()

        return app


def completion() -> dict[str, Any]:
    return {
        "id": "chatcmpl-held",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "held-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "all quiet"},
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
