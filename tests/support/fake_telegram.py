"""A fake Telegram Bot API on loopback: a FastAPI app at ``/bot<token>/<method>`` that records
every call and answers like Telegram. The gateway's client reaches it through
HBGW_TELEGRAM_API_URL; nothing of ours is patched.

Every request is a ``Call`` (method, parameters, the token of its URL, the monotonic time it
arrived, the status answered). ``sendMessage`` answers a fresh ``message_id``; ``getMe`` the
bot's user; ``setWebhook`` / ``deleteWebhook`` keep the webhook (``getUpdates`` answers 409
while one is set, as Telegram does); ``getUpdates`` hands out ``push``ed updates from its
``offset`` on, holding the request (up to a second) while there are none. Any other method
answers ``true``, recorded all the same, so a call the gateway should never make shows up.
``fail_next`` scripts the next answers of a method: a 429 with ``retry_after``, a 403, a 400
with Telegram's description, a 5xx.
"""

from __future__ import annotations

import asyncio
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

BOT_ID = 7001
TOKEN = f"{BOT_ID}:AAFakeTelegramBotToken_0123456789"
USERNAME = "hbgw_test_bot"
LONGEST_HOLD = 1.0  # seconds a getUpdates without updates is held, whatever its timeout


@dataclass(frozen=True)
class Call:
    method: str
    params: dict[str, Any]
    token: str
    at: float
    status: int


@dataclass(frozen=True)
class Failure:
    status: int
    description: str = ""
    retry_after: int | None = None


BLOCKED = Failure(403, "Forbidden: bot was blocked by the user")
CHAT_NOT_FOUND = Failure(400, "Bad Request: chat not found")
WEBHOOK_ACTIVE = Failure(
    409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to "
    "delete the webhook first",
)  # fmt: skip


@dataclass
class FakeTelegram:
    calls: list[Call] = field(default_factory=list)
    script: dict[str, deque[Failure]] = field(default_factory=dict)
    updates: list[dict[str, Any]] = field(default_factory=list)
    webhook: dict[str, Any] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(100))
    url: str = ""

    def fail_next(self, method: str, *failures: Failure) -> None:
        with self.lock:
            self.script.setdefault(method, deque()).extend(failures)

    def push(self, *updates: dict[str, Any]) -> None:
        with self.lock:
            self.updates.extend(updates)

    def registered(self) -> dict[str, Any] | None:
        """The webhook setWebhook left, if any."""
        with self.lock:
            return self.webhook

    def sends(self, **match: Any) -> list[Call]:
        """``sendMessage`` calls answered 200 whose parameters match ``match``."""
        return [
            c
            for c in self.of("sendMessage")
            if c.status == 200 and all(c.params.get(k) == v for k, v in match.items())
        ]

    def of(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method]

    def methods(self) -> list[str]:
        with self.lock:
            return [c.method for c in self.calls]

    def answer(self, method: str, params: dict[str, Any], token: str) -> JSONResponse:
        with self.lock:
            queued = self.script.get(method)
            failure = queued.popleft() if queued else None
            if failure is None and token != TOKEN:
                failure = Failure(401, "Unauthorized")
            if failure is None and method == "getUpdates" and self.webhook is not None:
                failure = WEBHOOK_ACTIVE
            status = failure.status if failure else 200
            self.calls.append(Call(method, params, token, time.monotonic(), status))
            if failure is not None:
                return refusal(failure)
            return JSONResponse({"ok": True, "result": self.result(method, params)})

    def result(self, method: str, params: dict[str, Any]) -> Any:
        if method == "sendMessage":
            sent = {"message_id": next(self._ids), "date": int(time.time()), "text": params["text"]}
            sent["chat"] = {"id": int(params["chat_id"])}
            if "message_thread_id" in params:
                sent["message_thread_id"] = params["message_thread_id"]
            return sent
        if method == "getMe":
            return {"id": BOT_ID, "is_bot": True, "first_name": "hbgw", "username": USERNAME}
        if method == "setWebhook":
            self.webhook = dict(params)
        if method == "deleteWebhook":
            self.webhook = None
        if method == "getUpdates":
            return self.pending(params)
        return True

    def pending(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Updates from ``offset`` on; those before it are confirmed, and forgotten."""
        offset = int(params.get("offset") or 0)
        self.updates = [u for u in self.updates if u["update_id"] >= offset]
        return list(self.updates)


def refusal(failure: Failure) -> JSONResponse:
    body: dict[str, Any] = {
        "ok": False,
        "error_code": failure.status,
        "description": failure.description or default_description(failure.status),
    }
    if failure.retry_after is not None:
        body["parameters"] = {"retry_after": failure.retry_after}
    return JSONResponse(body, status_code=failure.status)


def default_description(status: int) -> str:
    if status == 429:
        return "Too Many Requests: retry later"
    return "Internal Server Error" if status >= 500 else f"Error {status}"


def fake_telegram_app(fake: FakeTelegram) -> FastAPI:
    app = FastAPI()

    @app.api_route("/bot{token}/{method}", methods=["GET", "POST"])
    async def api(token: str, method: str, request: Request) -> JSONResponse:
        raw = await request.body()
        if request.headers.get("content-type", "").startswith("application/json"):
            params = json.loads(raw or b"{}")
        else:
            params = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        if method == "getUpdates":
            await hold(fake, params)
        return fake.answer(method, params, token)

    return app


async def hold(fake: FakeTelegram, params: dict[str, Any]) -> None:
    """A long poll: wait for an update from ``offset`` on, for a second at most."""
    offset = int(params.get("offset") or 0)
    deadline = time.monotonic() + min(float(params.get("timeout") or 0), LONGEST_HOLD)
    while time.monotonic() < deadline:
        with fake.lock:
            if any(u["update_id"] >= offset for u in fake.updates) or fake.webhook is not None:
                return
        await asyncio.sleep(0.02)


@contextmanager
def fake_telegram() -> Iterator[FakeTelegram]:
    fake = FakeTelegram()
    with serving(fake_telegram_app(fake)) as url:
        fake.url = url
        yield fake
