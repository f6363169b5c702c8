"""What the turn gate answers (``hbgw/state/turn_gate.py``): the results of its scripts, read from
their replies in one place."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import redis


@dataclass(frozen=True, slots=True)
class Began:
    """The caller holds the lock; its writes carry ``fence``. ``first``: a drain's first step,
    taken with the lock (``try_begin_drain``)."""

    fence: int
    first: Step | None = None


@dataclass(frozen=True, slots=True)
class Busy:
    """Not started. ``busy``: another turn holds the lock; ``inbox``: user messages go first.

    For a fire, the fire id is now the session's pending fire.
    """

    reason: Literal["busy", "inbox"]


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """The session is idle and the lock released; ``pending_fire`` should be begun next."""

    released: bool
    pending_fire: str | None


@dataclass(frozen=True, slots=True)
class NextMessage:
    """The oldest queued message, taken into the in-flight list; the caller keeps the
    (renewed) lock and answers it."""

    message_id: str


@dataclass(frozen=True, slots=True)
class Kept:
    """The first step of a drain grant found the inbox empty; the lock is kept (its delivery
    retries run first)."""


@dataclass(frozen=True, slots=True)
class Stopped:
    """An emergency stop holds the session: the lock was given back, the messages wait."""


@dataclass(frozen=True, slots=True)
class LockLost:
    """The lock was no longer the caller's; nothing was changed."""


Step = NextMessage | Kept | Stopped | TurnEnded | LockLost
Queue = Callable[[redis.client.Pipeline], object]  # commands sent ahead in one round trip


def text_of(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def step_result(reply: Sequence[Any]) -> Step:
    status = int(reply[0])
    if status == -1:
        return LockLost()
    if status == 2:
        return Stopped()
    if status == 3:
        return Kept()
    if status == 0:
        return NextMessage(text_of(reply[1]))
    pending = reply[1] if len(reply) > 1 else None
    return TurnEnded(released=True, pending_fire=None if pending is None else text_of(pending))


def begin_result(reply: Sequence[Any]) -> Began | Busy:
    if int(reply[0]) == 1:
        return Began(fence=int(reply[1]))
    reason = text_of(reply[1])
    if reason not in ("busy", "inbox"):
        raise RuntimeError(f"try_begin.lua returned an unknown reason {reason!r}")
    return Busy(reason="busy" if reason == "busy" else "inbox")


def raised(reply: Any) -> Any:
    """A pipeline's reply, or its command error raised."""
    if isinstance(reply, Exception):
        raise reply
    return reply


def lease_arg(lease_ms: int) -> int:
    # PX and PEXPIRE reject 0 and negative values with an error that names neither the key nor
    # the caller; fail here instead.
    if lease_ms < 1:
        raise ValueError(f"lease_ms must be >= 1, got {lease_ms}")
    return int(lease_ms)
