"""A webhook receiver on loopback, as another gateway would run one: a FastAPI app under
uvicorn that records every request (headers and body) and de-duplicates by Idempotency-Key.

A request whose key it has not taken yet is taken: answered 200 ``{"id": "hook-<n>"}``. One
whose key it took before is answered 200 ``{"duplicate": true}`` (a receiver's dedupe).
``script`` queues what the next requests get instead, in order: a status (500, 429 with
``Retry-After``, …; nothing is taken), or a hang (the message is taken, then the answer waits
``hang`` seconds, past the sender's timeout). ``gone`` answers 410 to everything from then on;
``answer`` and ``location`` script the body and a redirect's target.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from support.http_server import serving


@dataclass(frozen=True)
class Received:
    at: float  # monotonic
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    status: int
    taken: bool  # the first request of its key that the receiver kept

    @property
    def json(self) -> dict[str, Any]:
        found = json.loads(self.body)
        assert isinstance(found, dict)
        return found

    @property
    def key(self) -> str | None:
        return self.headers.get("idempotency-key")


@dataclass(frozen=True)
class Scripted:
    status: int = 200
    retry_after: int | None = None
    hang: float = 0.0  # seconds: take the message, then answer this late
    answer: dict[str, Any] | None = None  # the JSON body instead of the usual one
    location: str | None = None  # a redirect's Location


@dataclass
class FakeReceiver:
    requests: list[Received] = field(default_factory=list)
    script: deque[Scripted] = field(default_factory=deque)
    taken: dict[str, str] = field(default_factory=dict)  # key -> the id answered
    gone: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def hook(self, name: str = "in") -> str:
        """A URL of this receiver, with a token in its query as real hooks carry one."""
        return f"{self.url}/hooks/{name}?token=s3cr3t-{name}"

    def next(self, *answers: Scripted) -> None:
        with self.lock:
            self.script.extend(answers)

    def of_key(self, key: str) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.key == key]

    def kept(self) -> list[Received]:
        """The requests taken: one per key."""
        with self.lock:
            return [r for r in self.requests if r.taken]

    def answer(self, path: str, headers: dict[str, str], body: bytes) -> tuple[Scripted, Any]:
        with self.lock:
            scripted = self.script.popleft() if self.script else Scripted()
            key = headers.get("idempotency-key", "")
            status = 410 if self.gone else scripted.status
            taken = status == 200 and key not in self.taken
            if taken:
                self.taken[key] = f"hook-{len(self.taken) + 1}"
            self.requests.append(Received(time.monotonic(), path, headers, body, status, taken))
        if scripted.answer is not None:
            return scripted, scripted.answer
        if status != 200:
            return scripted, {"error": f"scripted {status}"}
        return scripted, ({"id": self.taken[key]} if taken else {"duplicate": True})


def receiver_app(fake: FakeReceiver) -> FastAPI:
    app = FastAPI()

    @app.post("/hooks/{name}")
    async def hook(name: str, request: Request) -> JSONResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        scripted, body = fake.answer(request.url.path, headers, await request.body())
        if scripted.hang:
            await asyncio.sleep(scripted.hang)
        status = 410 if fake.gone else scripted.status
        extra = {"Retry-After": str(scripted.retry_after)} if scripted.retry_after else {}
        if scripted.location:
            extra["Location"] = scripted.location
        return JSONResponse(body, status_code=status, headers=extra)

    return app


@contextmanager
def fake_receiver() -> Iterator[FakeReceiver]:
    fake = FakeReceiver()
    with serving(receiver_app(fake)) as url:
        fake.url = url
        yield fake
