"""A fake Slack Web API on loopback: a FastAPI app that records every call and answers like
Slack. ``slack_sdk``'s ``WebClient`` reaches it through ``base_url`` (``<url>/api/``); nothing of
ours is patched.

Every request is a ``Call`` (method, parameters, the bearer token, the monotonic time it
arrived, the status answered). ``chat.postMessage`` answers ``{"ok": true, "ts": …}`` with a
fresh ``ts``; any other method answers ``{"ok": true}``, recorded all the same, so a call the
gateway should never make (``assistant.threads.setStatus``, ``chat.update``, …) shows up.
``fail_next`` scripts the next answers of a method: a 429 with ``Retry-After``, an
``{"ok": false, "error": …}``, a bare HTTP status, or an answer held back past the client's
timeout (``delay``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from support.http_server import serving


@dataclass(frozen=True)
class Call:
    method: str
    params: dict[str, Any]
    token: str
    at: float
    status: int


@dataclass(frozen=True)
class Failure:
    status: int = 200
    error: str | None = None
    retry_after: int | None = None
    # Seconds the answer is held back (longer than the client's timeout: no answer comes).
    delay: float = 0


@dataclass
class FakeSlack:
    calls: list[Call] = field(default_factory=list)
    script: dict[str, deque[Failure]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _ts: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    url: str = ""

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def fail_next(self, method: str, *failures: Failure) -> None:
        with self.lock:
            self.script.setdefault(method, deque()).extend(failures)

    def posts(self, **match: Any) -> list[Call]:
        """``chat.postMessage`` calls answered 200 whose parameters match ``match``."""
        return [
            c
            for c in self.of("chat.postMessage")
            if c.status == 200 and all(c.params.get(k) == v for k, v in match.items())
        ]

    def of(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method]

    def methods(self) -> set[str]:
        with self.lock:
            return {c.method for c in self.calls}

    def _next(self, method: str) -> Failure | None:
        with self.lock:
            queued = self.script.get(method)
            return queued.popleft() if queued else None

    def _answer(
        self, method: str, params: dict[str, Any], token: str, failure: Failure | None
    ) -> JSONResponse:
        with self.lock:
            status = failure.status if failure else 200
            self.calls.append(Call(method, params, token, time.monotonic(), status))
            ts = f"1700000000.{next(self._ts):06d}"
        if failure is not None:
            headers = {}
            if failure.retry_after is not None:
                headers["Retry-After"] = str(failure.retry_after)
            body = {
                "ok": False,
                "error": failure.error or ("ratelimited" if status == 429 else "fatal_error"),
            }
            return JSONResponse(body, status_code=status, headers=headers)
        if method == "chat.postMessage":
            message = {"text": params.get("text"), "thread_ts": params.get("thread_ts"), "ts": ts}
            return JSONResponse(
                {"ok": True, "channel": params.get("channel"), "ts": ts, "message": message}
            )
        return JSONResponse({"ok": True})


def fake_slack_app(fake: FakeSlack) -> FastAPI:
    app = FastAPI()

    @app.post("/api/{method}")
    async def api(method: str, request: Request) -> JSONResponse:
        raw = await request.body()
        if request.headers.get("content-type", "").startswith("application/json"):
            params = json.loads(raw or b"{}")
        else:
            params = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        failure = fake._next(method)
        if failure is not None and failure.delay:
            await asyncio.sleep(failure.delay)
        return fake._answer(method, params, token, failure)

    return app


@contextmanager
def fake_slack() -> Iterator[FakeSlack]:
    fake = FakeSlack()
    with serving(fake_slack_app(fake)) as url:
        fake.url = url
        yield fake


def slack_headers(secret: str, body: bytes, timestamp: int, **extra: str) -> dict[str, str]:
    """The headers Slack signs a request with (v0 HMAC-SHA256 over ``v0:<ts>:<body>``)."""
    base = f"v0:{timestamp}:".encode() + body
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": signature, **extra}
