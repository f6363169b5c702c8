"""A session's live state in Redis: turn lock, fence, inbox, pending fire, e-stop.

Every transition that reads one of these and writes another is a Lua script in ``lua/`` touching
only the session's hash-tagged keys, so it is atomic and cluster-safe. The lock is fenced: each
grant increments ``fence``, and SQL writes of a turn carry its fence (``StaleFence`` otherwise).
Idle is not stored: a session is idle when its lock is free and nothing is queued or in flight,
so a scheduled idle session costs Redis its due-index entry and its fence counter only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import redis
from redis.commands.core import Script

from hbgw.state.keys import Keys
from hbgw.state.scripts import load_script

__all__ = [
    "Began",
    "Busy",
    "KeepLock",
    "LockLost",
    "TurnEnded",
    "TurnGate",
]

_PACKAGE = "hbgw.state"


@dataclass(frozen=True, slots=True)
class Began:
    """The caller holds the lock; its writes carry ``fence``."""

    fence: int


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
class KeepLock:
    """Messages are queued: the caller keeps the (renewed) lock and drains the inbox."""


@dataclass(frozen=True, slots=True)
class LockLost:
    """The lock was no longer the caller's; nothing was changed."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _begin_result(reply: Sequence[Any]) -> Began | Busy:
    if int(reply[0]) == 1:
        return Began(fence=int(reply[1]))
    reason = _text(reply[1])
    if reason not in ("busy", "inbox"):
        raise RuntimeError(f"try_begin.lua returned an unknown reason {reason!r}")
    return Busy(reason="busy" if reason == "busy" else "inbox")


class TurnGate:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._enqueue = self._script("enqueue_user.lua")
        self._try_begin = self._script("try_begin.lua")
        self._end_turn = self._script("end_turn.lua")
        self._renew = self._script("lock_renew.lua")
        self._release = self._script("lock_release.lua")
        self._seed = self._script("seed_session.lua")
        self._restore_inbox = self._script("restore_inbox.lua")

    def _script(self, name: str) -> Script:
        return load_script(self.client, _PACKAGE, f"lua/{name}")

    # -- inbox ----------------------------------------------------------------------------------

    def enqueue_user(self, session_id: str, message_id: str) -> int:
        """Queue a message id (the session is no longer idle); returns the inbox length."""
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        self._enqueue(
            keys=[k.inbox(session_id), k.inflight(session_id)],
            args=[message_id],
            client=pipe,
        )
        # A separate key in another slot, so not part of the script: a hint for a sweeper that
        # looks for inboxes nobody is draining, harmless when stale.
        pipe.sadd(k.inbox_sessions(), session_id)
        length, _ = pipe.execute()
        return int(length)

    def restore_inboxes(self, queued: Mapping[str, Sequence[int]]) -> dict[str, int]:
        """Put SQL's queued messages that Redis lost back into each session's inbox.

        Returns the number put back per session that got any. Every session with queued
        messages is marked for beat's sweeper, which dispatches a drain unless a turn runs:
        the sweeper's own set may have been lost with the rest.
        """
        k = self.keys
        sessions = list(queued)
        pipe = self.client.pipeline(transaction=False)
        for session_id in sessions:
            self._restore_inbox(
                keys=[k.inbox(session_id), k.inflight(session_id)],
                args=[str(message_id) for message_id in queued[session_id]],
                client=pipe,
            )
        added = {sid: int(n) for sid, n in zip(sessions, pipe.execute(), strict=True) if int(n)}
        if sessions:
            self.client.sadd(k.inbox_sessions(), *sessions)
        return added

    def pop_message(self, session_id: str) -> str | None:
        """Take the oldest message into the in-flight list; ``ack_message`` when answered."""
        k = self.keys
        value = self.client.lmove(k.inbox(session_id), k.inflight(session_id), "LEFT", "RIGHT")
        return None if value is None else _text(value)

    def next_message(self, session_id: str, ack: str | None = None) -> tuple[bool, str | None]:
        """The drain's step in one round trip: ``ack_message`` of ``ack`` (the message the
        last step answered), the emergency stop (global or the session's) and ``pop_message``.
        Under a stop: (True, None), and a message taken goes back to the head of the inbox,
        where it waits (one round trip more, only then; should the worker die in between, the
        in-flight list is restored as after any crash)."""
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        if ack is not None:
            pipe.lrem(k.inflight(session_id), 1, ack)
        pipe.exists(k.estop())  # two EXISTS, not one multi-key EXISTS: two cluster slots
        pipe.exists(k.estop(session_id))
        pipe.lmove(k.inbox(session_id), k.inflight(session_id), "LEFT", "RIGHT")
        every, own, value = pipe.execute()[-3:]
        if int(every) or int(own):
            if value is not None:
                self.client.lmove(k.inflight(session_id), k.inbox(session_id), "RIGHT", "LEFT")
            return True, None
        return False, None if value is None else _text(value)

    def ack_message(self, session_id: str, message_id: str) -> None:
        self.client.lrem(self.keys.inflight(session_id), 1, message_id)

    def inbox_length(self, session_id: str) -> int:
        return int(self.client.llen(self.keys.inbox(session_id)))

    def backlog(self, session_id: str) -> int:
        """Messages queued or taken by a turn that has not answered them yet."""
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        pipe.llen(k.inbox(session_id))
        pipe.llen(k.inflight(session_id))
        return sum(int(n) for n in pipe.execute())

    # -- turns ----------------------------------------------------------------------------------

    def _begin(
        self, session_id: str, token: str, lease_ms: int, fire_id: str, mode: str, member: str = ""
    ) -> Began | Busy:
        k = self.keys
        reply = self._try_begin(
            keys=[
                k.lock(session_id),
                k.fence(session_id),
                k.inbox(session_id),
                k.pending(session_id),
                k.inflight(session_id),
                k.pending_jobs(session_id),
            ],
            args=[token, _lease(lease_ms), fire_id, mode, member],
        )
        return _begin_result(reply)

    def try_begin_fire(
        self, session_id: str, fire_id: str, token: str, lease_ms: int
    ) -> Began | Busy:
        """Take the lock for a heartbeat fire, or leave ``fire_id`` as the pending fire."""
        return self._begin(session_id, token, lease_ms, fire_id, "fire")

    def try_begin_job(
        self, session_id: str, member: str, fire_id: str, token: str, lease_ms: int
    ) -> Began | Busy:
        """Take the lock for a cron job's run, or leave ``fire_id`` pending as that job's (a
        heartbeat's pending fire and other jobs' are kept beside it)."""
        return self._begin(session_id, token, lease_ms, fire_id, "job", member)

    def try_begin_user(self, session_id: str, token: str, lease_ms: int) -> Began | Busy:
        """Take the lock to drain the inbox; queued messages do not block this."""
        return self._begin(session_id, token, lease_ms, "", "user")

    def end_turn(
        self, session_id: str, token: str, lease_ms: int
    ) -> TurnEnded | KeepLock | LockLost:
        k = self.keys
        reply = self._end_turn(
            keys=[
                k.lock(session_id),
                k.inbox(session_id),
                k.pending(session_id),
                k.pending_jobs(session_id),
            ],
            args=[token, _lease(lease_ms)],
        )
        status = int(reply[0])
        if status == -1:
            return LockLost()
        if status == 0:
            return KeepLock()
        pending = reply[1] if len(reply) > 1 else None
        return TurnEnded(released=True, pending_fire=None if pending is None else _text(pending))

    def renew(self, session_id: str, token: str, lease_ms: int) -> bool:
        """Extend the lease if ``token`` still holds the lock."""
        return bool(self._renew(keys=[self.keys.lock(session_id)], args=[token, _lease(lease_ms)]))

    def renew_after(
        self,
        session_id: str,
        token: str,
        lease_ms: int,
        first: Callable[[redis.client.Pipeline], object],
    ) -> bool:
        """``renew`` in one round trip with the best-effort commands ``first`` queues ahead of it
        (a liveness stamp): their command errors are ignored, as a failed stamp always was.
        Sent by sha, since a ``Script`` in a pipeline costs a SCRIPT EXISTS round trip first; a
        Redis that lost its scripts (NOSCRIPT) is asked again by ``renew``, which loads it."""
        pipe = self.client.pipeline(transaction=False)
        first(pipe)
        pipe.evalsha(self._renew.sha, 1, self.keys.lock(session_id), token, _lease(lease_ms))
        held = pipe.execute(raise_on_error=False)[-1]
        if isinstance(held, redis.exceptions.NoScriptError):
            return self.renew(session_id, token, lease_ms)
        if isinstance(held, Exception):
            raise held
        return bool(held)

    def renew_many(self, locks: Sequence[tuple[str, str, int]]) -> list[bool]:
        """``renew`` for many (session, token, lease) at once: one pipelined round trip."""
        pipe = self.client.pipeline(transaction=False)
        for session_id, token, lease_ms in locks:
            self._renew(
                keys=[self.keys.lock(session_id)], args=[token, _lease(lease_ms)], client=pipe
            )
        return [bool(held) for held in pipe.execute()]

    def release(self, session_id: str, token: str) -> bool:
        """Drop the lock if ``token`` still holds it (an aborted turn)."""
        return bool(self._release(keys=[self.keys.lock(session_id)], args=[token]))

    def seed(self, session_id: str, fence_floor: int) -> int:
        """Raise the fence to at least ``fence_floor`` (never lower it); returns the fence."""
        return int(self._seed(keys=self._seed_keys(session_id), args=[int(fence_floor)]))

    def seed_many(self, fence_floors: Mapping[str, int], chunk: int = 10_000) -> None:
        """``seed`` for many sessions, pipelined: the restore pass covers every heartbeat."""
        items = list(fence_floors.items())
        for start in range(0, len(items), chunk):
            pipe = self.client.pipeline(transaction=False)
            for session_id, floor in items[start : start + chunk]:
                self._seed(keys=self._seed_keys(session_id), args=[int(floor)], client=pipe)
            pipe.execute()

    def _seed_keys(self, session_id: str) -> list[str]:
        return [self.keys.fence(session_id)]

    # -- reads ----------------------------------------------------------------------------------

    def pending(self, session_id: str) -> str | None:
        value = self.client.get(self.keys.pending(session_id))
        return None if value is None else _text(value)

    def pending_jobs(self, session_id: str) -> dict[str, str]:
        """Cron jobs' fires waiting for the session to go idle: member → fire id."""
        found = self.client.hgetall(self.keys.pending_jobs(session_id))
        return {_text(m): _text(f) for m, f in found.items()}

    def is_idle(self, session_id: str) -> bool:
        """No turn holds the lock and no message is queued or in flight."""
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(k.lock(session_id))
        pipe.llen(k.inbox(session_id))
        pipe.llen(k.inflight(session_id))
        return not any(int(n) for n in pipe.execute())

    def lock_holder(self, session_id: str) -> str | None:
        value = self.client.get(self.keys.lock(session_id))
        return None if value is None else _text(value)

    def fence(self, session_id: str) -> int:
        """The last fence granted; 0 before the first turn."""
        value = self.client.get(self.keys.fence(session_id))
        return 0 if value is None else int(value)

    # -- emergency stop -------------------------------------------------------------------------

    def set_estop(self, on: bool, session_id: str | None = None) -> None:
        """Switch one session's emergency stop, or the global one when ``session_id`` is None."""
        key = self.keys.estop(session_id)
        if on:
            self.client.set(key, "1")
        else:
            self.client.delete(key)

    def estop_active(self, session_id: str) -> bool:
        """True when the global or this session's emergency stop is on."""
        # Two EXISTS in a pipeline rather than one multi-key EXISTS: the keys are in different
        # cluster slots.
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(self.keys.estop())
        pipe.exists(self.keys.estop(session_id))
        return any(int(n) for n in pipe.execute())


def _lease(lease_ms: int) -> int:
    # PX and PEXPIRE reject 0 and negative values with an error that names neither the key nor
    # the caller; fail here instead.
    if lease_ms < 1:
        raise ValueError(f"lease_ms must be >= 1, got {lease_ms}")
    return int(lease_ms)
