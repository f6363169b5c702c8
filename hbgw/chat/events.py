"""Follow a session's events stream: parse it, resume after a drop, follow compression.

A dropped or refused stream is reopened with ``Last-Event-ID`` after a bounded, growing wait,
so no delivered message is missed and none is shown twice. An answer that retrying cannot
change (unknown session, bad token) ends the stream with that error.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass

import httpx

from hbgw.chat.client import ApiClient, ApiError, ChatMessage, error_from, unreachable
from hbgw.chat.sse import SseEvent, SseParser

# The API sends a keep-alive comment about every 15 s; a minute of nothing is a dead stream.
READ_TIMEOUT = 60.0
# Errors that retrying cannot fix; anything else (503, 500, a drop) is retried.
FINAL_STATUSES = frozenset({400, 401, 403, 404, 422})
# How often a wait between reconnects looks for a restarted `hbgw up` (a file read).
REDISCOVER_EVERY_S = 0.5


@dataclass(frozen=True)
class Moved:
    """The session was compressed and continues under ``moved_to``."""

    moved_to: str


@dataclass
class Backoff:
    """Waits between reconnects: doubling from ``first`` up to ``cap`` seconds."""

    first: float = 0.5
    cap: float = 8.0
    current: float = 0.0

    def next(self) -> float:
        self.current = min(self.cap, self.current * 2) if self.current else self.first
        return self.current

    def reset(self) -> None:
        self.current = 0.0


Problem = Callable[[str, float], None]
"""Told a sentence saying what went wrong and how many seconds until the next try."""


class EventStream:
    def __init__(
        self,
        client: ApiClient,
        session_id: str,
        *,
        after: int | None = None,
        stop: threading.Event | None = None,
        backoff: Backoff | None = None,
        on_problem: Problem | None = None,
        on_connect: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.last_id: str | None = None if after is None else str(after)
        self.stop = stop or threading.Event()
        self.backoff = backoff or Backoff()
        self.on_problem = on_problem or (lambda _sentence, _delay: None)
        self.on_connect = on_connect or (lambda: None)
        self._response: httpx.Response | None = None

    def close(self) -> None:
        """Stop from another thread: the open stream is closed, not left to its next keep-alive."""
        self.stop.set()
        response = self._response
        if response is None:
            return
        # Closing a socket does not wake a thread blocked reading it; shutting it down does.
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        with suppress(OSError):
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)

    def __iter__(self) -> Iterator[ChatMessage | Moved]:
        """Messages as delivered, and moves, until ``stop`` is set or a final error is raised."""
        while not self.stop.is_set():
            try:
                # A client per connection: a rediscovered address or token applies at once.
                with self.client.new_http(read_timeout=READ_TIMEOUT) as http:
                    yield from self._one_connection(http)
                problem = "The events stream ended"
            except Exception as exc:
                if self.stop.is_set():
                    return  # closed under the reader by close(), or stopped meanwhile
                problem = self._retryable(exc)
            if self.stop.is_set():
                return
            delay = self.backoff.next()
            self.on_problem(f"{problem}; retrying in {delay:g} s.", delay)
            self._pause(delay)

    def _pause(self, delay: float) -> None:
        """Wait ``delay`` seconds before the next try, looking the API up again meanwhile: a
        restarted `hbgw up` (a new token, maybe a new port, in its ``api.json``) is tried as
        soon as it is seen, not after the rest of a back-off that grew while it was away (up to
        two of them: the look-up used to come before the wait, when the file was still gone)."""
        deadline = time.monotonic() + delay
        while (left := deadline - time.monotonic()) > 0:
            if self.stop.wait(min(left, REDISCOVER_EVERY_S)) or self.client.rediscover():
                return

    def _retryable(self, exc: Exception) -> str:
        """What went wrong, in words, when trying again may help; else ``exc`` is raised."""
        if isinstance(exc, httpx.HTTPError):
            return str(unreachable(self.client.url, exc)).rstrip(".?")
        if isinstance(exc, ApiError) and (
            exc.status not in FINAL_STATUSES or self.client.rediscover()
        ):
            return str(exc).rstrip(".")
        raise exc

    def _one_connection(self, http: httpx.Client) -> Iterator[ChatMessage | Moved]:
        headers = {"Accept": "text/event-stream"}
        if self.last_id is not None:
            headers["Last-Event-ID"] = self.last_id
        path = f"/v1/sessions/{self.session_id}/events"
        with http.stream("GET", path, headers=headers) as response:
            self._response = response
            if self.stop.is_set():
                return  # close() came while connecting, before there was a socket to shut
            if response.status_code >= 400:
                response.read()
                raise error_from(response)
            self.backoff.reset()
            self.on_connect()
            parser = SseParser(last_id=self.last_id)
            for line in response.iter_lines():
                if self.stop.is_set():
                    return
                event = parser.feed(line)
                if event is None:
                    continue
                item = self._item(event)
                self.last_id = parser.last_id
                if item is not None:
                    yield item

    def _item(self, event: SseEvent) -> ChatMessage | Moved | None:
        try:
            data = json.loads(event.data)
        except ValueError:
            return None  # not ours to show; the id still counts as seen
        if event.event == "session" and isinstance(data, dict) and data.get("moved_to"):
            self.session_id = str(data["moved_to"])
            return Moved(self.session_id)
        if event.event == "message" and isinstance(data, dict):
            try:
                return ChatMessage.from_json(data)
            except (KeyError, TypeError, ValueError):
                return None
        return None
