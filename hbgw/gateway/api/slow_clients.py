"""A deadline for a client to send a request's headers (HBGW_API_READ_TIMEOUT).

h11 waits for headers forever, and uvicorn arms its keep-alive timer only after a response:
a connection that opens and then sends nothing, or a byte now and then, holds its socket and
its memory for good (slowloris). This protocol arms a timer when the connection opens and
again after each response, and disarms it once the request's headers are in; when it fires,
the connection is closed, with a ``408`` if part of a request had come (an idle connection
is closed without one: a client may be sending its next request just then). The body has its
own deadline in ``limits.BodyLimit``; an open event stream is a response, no timer limits it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\ncontent-length: 38\r\n"
    b"connection: close\r\n\r\nThe request headers came too slowly.\r\n"
)


class SlowClientProtocol(H11Protocol):
    read_timeout: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._headers_timer: asyncio.TimerHandle | None = None
        self._begun = False  # some bytes of the awaited request have come

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        self._begun = True
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the headers are in

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm()  # the next request's headers get the same deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._begun = False
        self._headers_timer = self.loop.call_later(self.read_timeout, self._timed_out)

    def _disarm(self) -> None:
        if self._headers_timer is not None:
            self._headers_timer.cancel()
            self._headers_timer = None

    def _timed_out(self) -> None:
        self._headers_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self._begun:
                self.transport.write(TIMED_OUT)
            self.transport.close()


def slow_client_protocol(read_timeout: float) -> type[SlowClientProtocol]:
    """The protocol class uvicorn builds per connection, with this deadline."""
    return type("SlowClientProtocol", (SlowClientProtocol,), {"read_timeout": read_timeout})
