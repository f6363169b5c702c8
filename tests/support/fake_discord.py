"""A fake Discord REST API on loopback: a FastAPI app that records every call and answers like
Discord. The gateway's httpx client reaches it through HBGW_DISCORD_API_URL (``<url>/api/v10``);
nothing of ours is patched.

Every request is a ``Call`` (what kind it is, its path's ids, the JSON body, the Authorization
and User-Agent headers, the monotonic time it arrived, the status answered). Kinds: ``message``
(``POST /channels/{id}/messages``, answered with a message and a fresh id; a repeated ``nonce``
with ``enforce_nonce`` gets the first message back, as Discord does), ``typing``, ``edit``
(``PATCH /webhooks/{app}/{token}/messages/@original``), ``followup``, ``commands`` (the PUTs of
register-commands) and ``other`` (404, recorded all the same, so a call the gateway should never
make shows up). Every answer carries rate-limit headers of one bucket per kind.
``fail_next`` scripts the next answers of a kind: a 429 with ``retry_after`` (and bucket
headers), a Discord error code with its status, a bare 5xx, or a 200 whose bucket is empty.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from support.http_server import serving

MESSAGES = {50001: "Missing Access", 50013: "Missing Permissions", 10003: "Unknown Channel"}


@dataclass(frozen=True)
class Call:
    kind: str
    ids: dict[str, str]
    body: Any
    auth: str
    agent: str
    at: float
    status: int
    answered: Any = None  # what the fake answered (a message with its id), on a 200

    @property
    def channel(self) -> str:
        return self.ids.get("channel", "")

    @property
    def content(self) -> str:
        return str((self.body or {}).get("content", ""))


@dataclass(frozen=True)
class Failure:
    status: int = 500
    code: int | None = None
    retry_after: float | None = None
    remaining: int | None = None  # with a 200: the bucket is spent after this answer
    reset_after: float = 1.0


@dataclass
class FakeDiscord:
    calls: list[Call] = field(default_factory=list)
    script: dict[str, deque[Failure]] = field(default_factory=dict)
    nonces: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1100000000000000001))
    url: str = ""

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/v10"

    def fail_next(self, kind: str, *failures: Failure) -> None:
        with self.lock:
            self.script.setdefault(kind, deque()).extend(failures)

    def of(self, kind: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.kind == kind]

    def messages(self, **match: Any) -> list[Call]:
        """Messages answered 200 whose channel (``channel=``) and content (``content=``) match."""
        return [
            c
            for c in self.of("message")
            if c.status == 200 and all(getattr(c, k) == v for k, v in match.items())
        ]

    def answer(self, kind: str, ids: dict[str, str], body: Any, request: Request) -> Response:
        with self.lock:
            queued = self.script.get(kind)
            failure = queued.popleft() if queued else None
            status = failure.status if failure else (204 if kind == "typing" else 200)
            if kind == "other":
                status = 404
            auth = request.headers.get("authorization", "")
            agent = request.headers.get("user-agent", "")
            made = self._made(kind, ids, body) if status == 200 else None
            call = Call(kind, ids, body, auth, agent, time.monotonic(), status, made)
            self.calls.append(call)
        headers = bucket_headers(kind, failure)
        if status == 429:
            assert failure is not None
            wait = failure.retry_after if failure.retry_after is not None else 1.0
            said = {"message": "You are being rate limited.", "retry_after": wait, "global": False}
            return JSONResponse(said, status_code=429, headers=headers)
        if status >= 400:
            code = failure.code if failure and failure.code is not None else 0
            message = MESSAGES.get(code, f"{status}: error")
            return JSONResponse({"message": message, "code": code}, status, headers=headers)
        if status == 204:
            return Response(status_code=204, headers=headers)
        return JSONResponse(made, headers=headers)

    def _made(self, kind: str, ids: dict[str, str], body: Any) -> Any:
        if kind == "commands":
            return [{"id": str(next(self._ids)), **c} for c in body]
        message = {"id": str(next(self._ids)), "channel_id": ids.get("channel", ""), **(body or {})}
        nonce = (body or {}).get("nonce")
        if kind == "message" and nonce and (body or {}).get("enforce_nonce"):
            return self.nonces.setdefault((ids["channel"], str(nonce)), message)
        return message


def bucket_headers(kind: str, failure: Failure | None) -> dict[str, str]:
    remaining = failure.remaining if failure and failure.remaining is not None else 4
    if failure is not None and failure.status == 429:
        remaining = 0
    reset = failure.reset_after if failure else 1.0
    if failure is not None and failure.retry_after is not None:
        reset = failure.retry_after
    return {
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset-After": f"{reset:.3f}",
        "X-RateLimit-Bucket": f"bucket-{kind}",
    }


def fake_discord_app(fake: FakeDiscord) -> FastAPI:
    app = FastAPI()

    async def take(kind: str, request: Request, **ids: str) -> Response:
        raw = await request.body()
        body = await request.json() if raw else None
        return fake.answer(kind, ids, body, request)

    @app.post("/api/v10/channels/{channel}/messages")
    async def message(channel: str, request: Request) -> Response:
        return await take("message", request, channel=channel)

    @app.post("/api/v10/channels/{channel}/typing")
    async def typing(channel: str, request: Request) -> Response:
        return await take("typing", request, channel=channel)

    @app.patch("/api/v10/webhooks/{app_id}/{token}/messages/@original")
    async def edit(app_id: str, token: str, request: Request) -> Response:
        return await take("edit", request, app=app_id, token=token)

    @app.post("/api/v10/webhooks/{app_id}/{token}")
    async def followup(app_id: str, token: str, request: Request) -> Response:
        return await take("followup", request, app=app_id, token=token)

    @app.put("/api/v10/applications/{app_id}/commands")
    async def commands(app_id: str, request: Request) -> Response:
        return await take("commands", request, app=app_id)

    @app.put("/api/v10/applications/{app_id}/guilds/{guild}/commands")
    async def guild_commands(app_id: str, guild: str, request: Request) -> Response:
        return await take("commands", request, app=app_id, guild=guild)

    @app.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def other(rest: str, request: Request) -> Response:
        return await take("other", request, path=rest)

    return app


@contextmanager
def fake_discord() -> Iterator[FakeDiscord]:
    fake = FakeDiscord()
    with serving(fake_discord_app(fake)) as url:
        fake.url = url
        yield fake
