"""A session's live state in Redis: turn lock, fence, inbox, pending fire, e-stop.

Every transition that reads one of these and writes another is a Lua script in ``lua/`` touching
only the session's hash-tagged keys, so it is atomic and cluster-safe. The lock is fenced: each
grant increments ``fence``, and SQL writes of a turn carry its fence (``StaleFence`` otherwise).
Idle is not stored: a session is idle when its lock is free and nothing is queued or in flight,
so a scheduled idle session costs Redis its due-index entry and its fence counter only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import redis
from redis.commands.core import Script

from hbgw.state.keys import Keys
from hbgw.state.scripts import load_script
from hbgw.state.turn_gate_results import (
    Began,
    Busy,
    Kept,
    LockLost,
    NextMessage,
    Queue,
    Step,
    Stopped,
    TurnEnded,
    begin_result,
    lease_arg,
    raised,
    step_result,
    text_of,
)

__all__ = [
    "Began",
    "Busy",
    "Kept",
    "LockLost",
    "NextMessage",
    "Queue",
    "Step",
    "Stopped",
    "TurnEnded",
    "TurnGate",
]

_PACKAGE = "hbgw.state"


class TurnGate:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._enqueue = self._script("enqueue_user.lua")
        self._try_begin = self._script("try_begin.lua")
        self._next_step = self._script("next_step.lua")
        self._renew = self._script("lock_renew.lua")
        self._release = self._script("lock_release.lua")
        self._seed = self._script("seed_session.lua")
        self._restore_inbox = self._script("restore_inbox.lua")

    def load_scripts(self) -> None:
        """Load the scripts the turn sends by sha inside pipelines (a worker, at start-up), so
        its first turns need no NOSCRIPT fallback; a Redis that restarts later loses them, and
        the fallback loads them again then."""
        for script in (self._try_begin, self._next_step, self._renew):
            self.client.script_load(script.script)

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
        return None if value is None else text_of(value)

    def ack_message(self, session_id: str, message_id: str) -> None:
        self.client.lrem(self.keys.inflight(session_id), 1, message_id)

    def leave(self, session_id: str, ack: str | None, first: Queue | None) -> list[Exception]:
        """A turn that lost its lock: ``first``'s commands and the ack of ``ack`` still go, in
        one round trip; their command errors are returned."""
        pipe = self.client.pipeline(transaction=False)
        if first is not None:
            first(pipe)
        if ack is not None:
            pipe.lrem(self.keys.inflight(session_id), 1, ack)
        return [e for e in pipe.execute(raise_on_error=False) if isinstance(e, Exception)]

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

    def _begin_keys(self, session_id: str) -> list[str]:
        k = self.keys
        return [
            k.lock(session_id),
            k.fence(session_id),
            k.inbox(session_id),
            k.pending(session_id),
            k.inflight(session_id),
            k.pending_jobs(session_id),
        ]

    def _begin(
        self, session_id: str, token: str, lease_ms: int, fire_id: str, mode: str, member: str = ""
    ) -> Began | Busy:
        reply = self._try_begin(
            keys=self._begin_keys(session_id),
            args=[token, lease_arg(lease_ms), fire_id, mode, member],
        )
        return begin_result(reply)

    def try_begin_fire(
        self, session_id: str, fire_id: str, token: str, lease_ms: int
    ) -> Began | Busy:
        """Take the lock for a heartbeat fire, or leave ``fire_id`` as the pending fire."""
        return self._begin(session_id, token, lease_ms, fire_id, "fire")

    def try_begin_fire_reading(
        self, session_id: str, fire_id: str, token: str, lease_ms: int, reads: Queue, job: str = ""
    ) -> tuple[Began | Busy, list[Any]]:
        """``try_begin_fire`` and the plain reads ``reads`` queues after it, in one round trip:
        what they answer is read with the lock (taken or not), in the order queued. A command
        error of theirs is raised. ``job``: a cron job's member, whose run takes the lock or
        leaves ``fire_id`` pending as that job's (a heartbeat's and other jobs' kept beside it)."""
        keys = self._begin_keys(session_id)
        args: list[str | int] = [token, lease_arg(lease_ms), fire_id, "job" if job else "fire", job]
        pipe = self.client.pipeline(transaction=False)
        pipe.evalsha(self._try_begin.sha, len(keys), *keys, *args)
        reads(pipe)
        began, *read = pipe.execute(raise_on_error=False)
        if isinstance(began, redis.exceptions.NoScriptError):  # Redis lost its scripts
            began = self._try_begin(keys=keys, args=args)
        return begin_result(raised(began)), [raised(r) for r in read]

    def try_begin_user(self, session_id: str, token: str, lease_ms: int) -> Began | Busy:
        """Take the lock to drain the inbox; queued messages do not block this."""
        return self._begin(session_id, token, lease_ms, "", "user")

    def try_begin_drain(self, session_id: str, token: str, lease_ms: int) -> Began | Busy:
        """``try_begin_user`` and the drain's first step (``next_step`` with the lock kept,
        even for an empty inbox: the grant's delivery retries run first) in one round trip;
        that step is ``Began.first``."""
        keys = self._begin_keys(session_id)
        args: list[str | int] = [token, lease_arg(lease_ms), "", "user", ""]
        pipe = self.client.pipeline(transaction=False)
        pipe.evalsha(self._try_begin.sha, len(keys), *keys, *args)
        pipe.exists(self.keys.estop())
        self._queue_step(pipe, session_id, token, lease_ms, "", "keep")
        began, every, step = pipe.execute(raise_on_error=False)
        if isinstance(began, redis.exceptions.NoScriptError):  # Redis lost its scripts
            began = self._try_begin(keys=keys, args=args)
            step = self._run_step(session_id, token, lease_ms, "", "keep")
        result = begin_result(raised(began))
        if not isinstance(result, Began):
            return result
        first = self._step_reply(step, session_id, token, lease_ms, "", "keep")
        if int(raised(every)):
            first = self._held(session_id, token, first)
        return Began(result.fence, first)

    def next_step(
        self,
        session_id: str,
        token: str,
        lease_ms: int,
        *,
        ack: str | None = None,
        first: Queue | None = None,
    ) -> tuple[Step, list[Exception]]:
        """The drain's step in one round trip (``next_step.lua``): the commands ``first`` queues
        (what the finished turn leaves for Redis: its wake-up, due time and stamp), the ack of
        ``ack``, then the next message taken, or the turn ended; the global emergency stop read
        beside it. Under that stop a message taken goes back to the head of the inbox and the
        lock is given back (one round trip more, only then). Returns the step and the command
        errors of ``first``'s commands (best effort: the caller logs them)."""
        pipe = self.client.pipeline(transaction=False)
        if first is not None:
            first(pipe)
        pipe.exists(self.keys.estop())
        self._queue_step(pipe, session_id, token, lease_ms, ack or "", "end")
        *early, every, reply = pipe.execute(raise_on_error=False)
        step = self._step_reply(reply, session_id, token, lease_ms, ack or "", "end")
        if int(raised(every)):
            step = self._held(session_id, token, step)
        return step, [e for e in early if isinstance(e, Exception)]

    def _step_keys(self, session_id: str) -> list[str]:
        k = self.keys
        return [
            k.lock(session_id),
            k.inbox(session_id),
            k.inflight(session_id),
            k.pending(session_id),
            k.pending_jobs(session_id),
            k.estop(session_id),
        ]

    def _queue_step(
        self, pipe: redis.client.Pipeline, sid: str, token: str, lease_ms: int, ack: str, mode: str
    ) -> None:
        # By sha: a ``Script`` in a pipeline costs a SCRIPT EXISTS round trip first.
        keys = self._step_keys(sid)
        pipe.evalsha(self._next_step.sha, len(keys), *keys, token, lease_arg(lease_ms), ack, mode)

    def _run_step(self, sid: str, token: str, lease_ms: int, ack: str, mode: str) -> Any:
        return self._next_step(
            keys=self._step_keys(sid), args=[token, lease_arg(lease_ms), ack, mode]
        )

    def _step_reply(
        self, reply: Any, sid: str, token: str, lease_ms: int, ack: str, mode: str
    ) -> Step:
        if isinstance(reply, redis.exceptions.NoScriptError):  # Redis lost its scripts
            reply = self._run_step(sid, token, lease_ms, ack, mode)
        return step_result(raised(reply))

    def _held(self, session_id: str, token: str, step: Step) -> Step:
        """The global emergency stop is on: a message taken goes back, the lock is given back.
        A turn the step ended stays ended: its pending fire goes on to admission, whose
        re-check refunds it under the stop."""
        if isinstance(step, NextMessage | Kept):
            k = self.keys
            if isinstance(step, NextMessage):
                self.client.lmove(k.inflight(session_id), k.inbox(session_id), "RIGHT", "LEFT")
            self.release(session_id, token)
            return Stopped()
        return step

    def renew(self, session_id: str, token: str, lease_ms: int) -> bool:
        """Extend the lease if ``token`` still holds the lock."""
        return bool(
            self._renew(keys=[self.keys.lock(session_id)], args=[token, lease_arg(lease_ms)])
        )

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
        pipe.evalsha(self._renew.sha, 1, self.keys.lock(session_id), token, lease_arg(lease_ms))
        held = pipe.execute(raise_on_error=False)[-1]
        if isinstance(held, redis.exceptions.NoScriptError):
            return self.renew(session_id, token, lease_ms)
        if isinstance(held, Exception):
            raise held
        return bool(held)

    def renew_many(
        self, locks: Sequence[tuple[str, str, int]], first: Queue | None = None
    ) -> list[bool]:
        """``renew`` for many (session, token, lease) at once: one pipelined round trip, after
        the best-effort commands ``first`` queues (held liveness stamps; their errors ignored)."""
        pipe = self.client.pipeline(transaction=False)
        if first is not None:
            first(pipe)
        ahead = len(pipe)
        for session_id, token, lease_ms in locks:
            self._renew(
                keys=[self.keys.lock(session_id)], args=[token, lease_arg(lease_ms)], client=pipe
            )
        replies = pipe.execute(raise_on_error=False)[ahead:]
        return [bool(raised(held)) for held in replies]

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
        return None if value is None else text_of(value)

    def pending_jobs(self, session_id: str) -> dict[str, str]:
        """Cron jobs' fires waiting for the session to go idle: member → fire id."""
        found = self.client.hgetall(self.keys.pending_jobs(session_id))
        return {text_of(m): text_of(f) for m, f in found.items()}

    def is_idle(self, session_id: str) -> bool:
        """No turn holds the lock and no message is queued or in flight."""
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(self.keys.lock(session_id))
        pipe.llen(self.keys.inbox(session_id))
        pipe.llen(self.keys.inflight(session_id))
        return not any(int(n) for n in pipe.execute())

    def lock_holder(self, session_id: str) -> str | None:
        value = self.client.get(self.keys.lock(session_id))
        return None if value is None else text_of(value)

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
        return any(self.estops(session_id))

    def estops(self, session_id: str) -> tuple[bool, bool]:
        """Whether the global emergency stop is on, and whether this session's is."""
        # Two EXISTS in a pipeline rather than one multi-key EXISTS: the keys are in different
        # cluster slots.
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(self.keys.estop())
        pipe.exists(self.keys.estop(session_id))
        global_stop, session_stop = (bool(int(n)) for n in pipe.execute())
        return global_stop, session_stop
