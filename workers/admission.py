"""Admission: what to do with a fire or a drain request before any turn runs.

Fire: dedupe → load → (unknown, inactive or not due: settle the index, stop) → owner? (else
forward) → try_begin (busy: the fire waits as the session's pending fire) → a granted lock.
Drain: owner? → estop? → try_begin (busy: the holder drains before it lets go) → a granted lock.
A granted lock goes to ``start``, which runs the locked session loop.
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
from workers.heartbeat_turn import Fire, is_active
from workers.locks import Grant
from workers.logfields import fields, log

Start = Callable[[Grant, Fire | None], None]


class Admission:
    def __init__(self, rt: Runtime, dispatcher: Dispatcher, lease_ms: int, start: Start) -> None:
        self.rt = rt
        self.dispatcher = dispatcher
        self.lease_ms = lease_ms
        self.start = start

    def fire(self, session_id: str, due_ms: int, *, deferred: bool = False) -> str:
        fid = fire_id(session_id, due_ms)
        outcome = self._admit(session_id, due_ms, fid, deferred)
        log.debug("fire %s: %s", fid, outcome, extra=fields(f"fire.{outcome}", session_id, fid))
        return outcome

    def _admit(self, session_id: str, due_ms: int, fid: str, deferred: bool) -> str:
        rt = self.rt
        try:
            session = rt.store.resolve_active(session_id)
        except NotFound:
            rt.index.remove(session_id)
            return "unknown-session"
        sid = session.id
        if sid != session_id:
            rt.index.remove(session_id)  # compressed: the child carries the heartbeat now
        if session.status != SessionStatus.ACTIVE:
            rt.index.remove(sid)
            return "inactive-session"
        if rt.store.get_run(fid) is not None:
            rt.settle(sid)
            return "duplicate"
        state = rt.store.get_heartbeat(sid)
        now = rt.clock()
        if state is None or not is_active(state):
            rt.index.remove(sid)
            return "inactive"
        if not state.is_due(now):
            rt.settle(sid)
            return "not-due"
        return self._begin_fire(Fire(session, fid, due_ms, deferred), session_id, now)

    def _begin_fire(self, fire: Fire, requested_id: str, now: datetime) -> str:
        rt, sid = self.rt, fire.session.id
        owner = rt.registry.owner(sid, to_ms(now))
        if owner != rt.worker:
            if owner is not None:
                self.dispatcher.fires(owner, [(requested_id, fire.due_ms)])
            return "forwarded"
        token = uuid.uuid4().hex
        begun = rt.gate.try_begin_fire(sid, fire.fire_id, token, self.lease_ms)
        if not isinstance(begun, Began):
            log.info("fire pending", extra=fields("fire.pending", sid, fire.fire_id))
            return "pending"
        self.start(Grant(sid, token, begun.fence), fire)
        return "began"

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
            return "estop"  # messages wait in the inbox; the sweeper asks again later
        token = uuid.uuid4().hex
        begun = rt.gate.try_begin_user(sid, token, self.lease_ms)
        if not isinstance(begun, Began):
            return "busy"  # the lock holder drains the inbox before it lets go
        self.start(Grant(sid, token, begun.fence), None)
        return "began"
