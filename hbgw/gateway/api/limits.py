"""The request body size limit (HBGW_API_MAX_BODY_BYTES) and read deadline
(HBGW_API_READ_TIMEOUT), as plain ASGI middleware.

The body is read here, up to the limit, before any route sees it: a declared length over the
limit is refused at once, and a chunked body is refused as soon as it passes the limit. The
whole body must arrive within the deadline (408 after it): a client sending a byte now and
then would otherwise hold a connection and a worker thread's request for good.

Before a 413 the rest of what the client is sending is read and dropped, at most
``DRAIN_BYTES`` within ``DRAIN_SECONDS``: the server closes the connection after the answer, and
a close with unread bytes makes the kernel send a reset, which can reach the client before it
reads the 413 (it then sees "connection reset" instead of the sentence; seen on a busy machine).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hbgw.gateway.api.errors import error_body

# What a refused body may still send before its 413 (bounded: a refusal costs no more than this).
DRAIN_BYTES = 1 << 20
DRAIN_SECONDS = 2.0


class BodyLimit:
    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        read_timeout: float = 10.0,
        refused: Callable[[str], None] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.read_timeout = read_timeout
        self.refused = refused  # told the path of every body refused as too large

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _drain(receive, more=declared <= DRAIN_BYTES)
            await self._refuse(send, scope)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        deadline = time.monotonic() + self.read_timeout
        while more:
            try:
                message = await asyncio.wait_for(receive(), deadline - time.monotonic())
            except TimeoutError:
                await _send_error(send, 408, "request_timeout", self._too_slow())
                return
            if message["type"] != "http.request":
                return  # the client went away before sending the whole body
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _drain(receive, more=message.get("more_body", False))
                await self._refuse(send, scope)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def _refuse(self, send: Send, scope: Scope) -> None:
        if self.refused is not None:
            self.refused(str(scope.get("path", "")))
        sentence = f"The request body is larger than {self.max_bytes} bytes; send less."
        await _send_error(send, 413, "payload_too_large", sentence)

    def _too_slow(self) -> str:
        return (
            f"The request body did not arrive within {self.read_timeout:g} s "
            "(HBGW_API_READ_TIMEOUT); send it at once."
        )


async def _drain(receive: Receive, *, more: bool) -> None:
    """Read and drop the rest of a refused body, at most ``DRAIN_BYTES`` within
    ``DRAIN_SECONDS``; whatever is left after that is cut by the close."""
    left, deadline = DRAIN_BYTES, time.monotonic() + DRAIN_SECONDS
    while more and left > 0:
        try:
            message = await asyncio.wait_for(receive(), deadline - time.monotonic())
        except TimeoutError:
            return
        if message["type"] != "http.request":
            return
        left -= len(message.get("body", b""))
        more = message.get("more_body", False)


async def _send_error(send: Send, status: int, code: str, sentence: str) -> None:
    body = json.dumps(error_body(code, sentence)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            message: dict[str, Any] = {"type": "http.request", "body": body, "more_body": False}
            return message
        return await receive()

    return replay
