"""Counting Redis round trips of one client on a real Redis: every packed send of its
connections (one command, or one whole pipeline) is one round trip.

Hooked at the connection level: the client's pool makes its connections from a subclass that
notes each ``send_packed_command`` before sending it for real — nothing answers but Redis. A
health check's PING (redis-py's, after 15 s idle) is the library's, not the turn's: not counted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import redis

HEALTH_CHECK = ["PING"]


@dataclass
class RedisCount:
    round_trips: int = 0
    sent: list[list[str]] = field(default_factory=list)  # each round trip's command names

    @property
    def lines(self) -> str:
        return "\n".join(" ".join(names) for names in self.sent)


def command_names(packed: bytes) -> list[str]:
    """The command names in one packed send (RESP arrays of bulk strings)."""
    names, at = [], 0
    while at < len(packed) and packed[at : at + 1] == b"*":
        end = packed.index(b"\r\n", at)
        items = int(packed[at + 1 : end])
        at = end + 2
        for item in range(items):
            end = packed.index(b"\r\n", at)
            size = int(packed[at + 1 : end])
            if item == 0:
                names.append(packed[end + 2 : end + 2 + size].decode().upper())
            at = end + 2 + size + 2
    return names


class RedisCounter:
    """Installed on a client once (its pool reconnects through the counting class); then
    ``counting()`` blocks count that client's round trips, every thread's."""

    def __init__(self, client: redis.Redis) -> None:
        self._lock = threading.Lock()
        self._count: RedisCount | None = None
        pool = client.connection_pool
        base: type[Any] = pool.connection_class
        counter = self

        class Counting(base):  # type: ignore[misc]
            def send_packed_command(self, command: Any, check_health: bool = True) -> None:
                counter._note(command)
                super().send_packed_command(command, check_health)

        pool.disconnect()
        pool.connection_class = Counting
        pool.reset()

    def _note(self, command: Any) -> None:
        packed = command if isinstance(command, bytes) else b"".join(command)
        names = command_names(packed)
        with self._lock:
            if self._count is not None and names != HEALTH_CHECK:
                self._count.round_trips += 1
                self._count.sent.append(names)

    @contextmanager
    def counting(self) -> Iterator[RedisCount]:
        count = RedisCount()
        with self._lock:
            self._count = count
        try:
            yield count
        finally:
            with self._lock:
                self._count = None
