"""Admission: what to do with a fire or a drain request before any turn runs.

Fire: dedupe → load → (unknown, inactive or not due: settle the index, stop) → owner? (else
forward) → accepted. Drain: owner? → estop? → accepted. An accepted request goes to ``start``,
which queues it for a turn thread; only that thread takes the lock (``take_lock``), so a lock
is never held, unrenewed, by a request still waiting for a thread (its lease would run out
before the turn begins). Busy there: the fire waits as the session's pending fire, a drain is
left to the holder, which drains before it lets go.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime

from core.clock import to_ms
from core.errors import NotFound
from sessions.states import SessionStatus, fire_id
from state.dispatch import Dispatcher
from state.runtime import Runtime
from state.turn_gate import Began
from workers.heartbeat_turn import Fire, is_active, settle_duplicate
from workers.locks import Grant
from workers.logfields import fields, log

Start = Callable[[str, Fire | None], None]

ESTOP = "estop"  # what a drain held by the emergency stop answers


class Admission:
    def __init__(self, rt: Runtime, dispatcher: Dispatcher, lease_ms: int, start: Start) -> None:
        self.rt = rt
        self.dispatcher = dispatcher
        self.lease_ms = lease_ms
        self.start = start
        self.held: set[str] = set()  # sessions whose drain the emergency stop holds

    def fire(self, session_id: str, due_ms: int, *, deferred: bool = False) -> str:
        fid = fire_id(session_id, due_ms)
        outcome = self._admit(session_id, due_ms, fid, deferred)
        log.debug("fire %s: %s", fid, outcome, extra=fields(f"fire.{outcome}", session_id, fid))
        return outcome

    def _admit(self, session_id: str, due_ms: int, fid: str, deferred: bool) -> str:
        rt = self.rt
        try:
            # One read: the conversation's active session, the ledger, the heartbeat.
            seen = rt.store.admit_fire(session_id, fid)
        except NotFound:
            rt.index.remove(session_id)
            return "unknown-session"
        session = seen.session
        sid = session.id
        if sid != session_id:
            rt.index.remove(session_id)  # compressed: the child carries the heartbeat now
        if session.status != SessionStatus.ACTIVE:
            rt.index.remove(sid)
            return "inactive-session"
        if seen.existing is not None:
            settle_duplicate(rt, sid, seen.existing, seen.next_due)
            return "duplicate"
        state = seen.state
        now = rt.clock()
        if state is None or not is_active(state):
            rt.index.remove(sid)
            return "inactive"
        if not state.is_due(now):
            rt.apply_due(sid, seen.next_due)
            return "not-due"
        return self._begin_fire(Fire(session, fid, due_ms, deferred), session_id, now)

    def _begin_fire(self, fire: Fire, requested_id: str, now: datetime) -> str:
        rt, sid = self.rt, fire.session.id
        owner = rt.registry.owner(sid, to_ms(now))
        if owner != rt.worker:
            if owner is not None:
                self.dispatcher.fires(owner, [(requested_id, fire.due_ms)])
            return "forwarded"
        self.start(sid, fire)
        return "accepted"

    def drain(self, session_id: str) -> str:
        """A user message was queued: run the inbox under the lock if nobody else is."""
        rt = self.rt
        # Messages queued before a compression are answered in the conversation they were
        # sent to; new ones go to the session that continues it.
        sid = session_id if rt.gate.backlog(session_id) else rt.store.resolve_active(session_id).id
        owner = rt.registry.owner(sid, rt.now_ms())
        if owner != rt.worker:
            if owner is not None:
                self.dispatcher.drain(owner, sid)
            return "forwarded"
        if rt.gate.estop_active(sid):
            # Messages wait in the inbox; beat's sweeper asks again about once a second, so
            # this is said once per stop and session, not at every ask.
            if sid not in self.held:
                self.held.add(sid)
                log.info(
                    "drain held by the emergency stop; messages wait until it is lifted",
                    extra=fields("drain.estop", sid),
                )
            return ESTOP
        self.held.discard(sid)
        self.start(sid, None)
        return "accepted"

    def take_lock(self, sid: str, fire: Fire | None) -> Grant | None:
        """On the turn thread, as the turn begins: the lock, or None when the session is busy."""
        token = uuid.uuid4().hex
        if fire is None:
            begun = self.rt.gate.try_begin_user(sid, token, self.lease_ms)
            # Busy: the lock holder drains the inbox before it lets go.
            return Grant(sid, token, begun.fence) if isinstance(begun, Began) else None
        begun = self.rt.gate.try_begin_fire(sid, fire.fire_id, token, self.lease_ms)
        if not isinstance(begun, Began):
            log.info("fire pending", extra=fields("fire.pending", sid, fire.fire_id))
            return None
        return Grant(sid, token, begun.fence)
