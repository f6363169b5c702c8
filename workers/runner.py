"""The turn runner: accepts heartbeat fires and user messages, and runs turns under the lock.

Fire path: dedupe → load → (not due: settle, stop) → owner? → try_begin (busy: pending) →
reserve in SQL with the fence → re-check session, conversation, generation, owner, estop
(else refund) → mark started → agent turn → deliver (quiet, silence) → finish → settle the
index → end of turn: inbox first, then the pending fire, else idle.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import redis

from core.clock import to_ms
from core.errors import HbgwError, NotFound, StaleFence
from sessions.heartbeat import HeartbeatState
from sessions.views import Duplicate, Refused, RunView, SessionView
from state.dispatch import Dispatcher
from state.runtime import Runtime
from state.turn_gate import Began, KeepLock, LockLost, TurnEnded
from workers.agents.base import Agent, TurnRequest
from workers.injection import EMPTY_REPLY_NOTICE, heartbeat_message, is_silent
from workers.locks import LockKeeper, TurnAborted
from workers.ports import Address, Channel

log = logging.getLogger("hbgw.runner")

HISTORY_TURNS = 20
# Test seam: called after a reservation, before the re-check (simulates races).
BeforeStartHook = Callable[[str, RunView], None]


def parse_fire_id(fire_id: str) -> tuple[str, int]:
    session_id, _, due = fire_id.rpartition(":")
    return session_id, int(due)


class TurnRunner:
    def __init__(
        self,
        rt: Runtime,
        dispatcher: Dispatcher,
        *,
        agent: Agent,
        channel: Channel,
        threads: int = 8,
    ) -> None:
        self.rt = rt
        self.agent = agent
        self.channel = channel
        self.dispatcher = dispatcher
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hbgw-turn")
        self.before_start: list[BeforeStartHook] = []
        self.lease_ms = int(rt.settings.lock_lease * 1000)

    def shutdown(self, wait: bool = True) -> None:
        self.executor.shutdown(wait=wait)

    # -- entry points (the Celery tasks call these) -----------------------------------------

    def accept_fires(self, fires: list[tuple[str, int]]) -> list[str]:
        return [self.accept_fire(sid, due) for sid, due in fires]

    def accept_fire(self, session_id: str, due_ms: int, *, deferred: bool = False) -> str:
        """Decide what to do with one fire; a turn that can start runs on the executor."""
        rt = self.rt
        fire_id = f"{session_id}:{due_ms}"
        try:
            session = rt.store.resolve_active(session_id)
        except NotFound:
            rt.index.remove(session_id)
            return "unknown-session"
        sid = session.id
        if sid != session_id:
            rt.index.remove(session_id)  # compressed: the child carries the heartbeat now
        if session.status != "active":
            rt.index.remove(sid)
            return "inactive-session"
        if rt.store.get_run(fire_id) is not None:
            rt.settle(sid)
            return "duplicate"
        state = rt.store.get_heartbeat(sid)
        now = rt.clock()
        if state is None or state.status != "active":
            rt.index.remove(sid)
            return "inactive"
        if not state.is_due(now):
            rt.settle(sid)
            return "not-due"
        owner = rt.registry.owner(sid, to_ms(now))
        if owner != rt.worker:
            if owner is not None:
                self.dispatcher.fires(owner, [(session_id, due_ms)])
            return "forwarded"
        token = uuid.uuid4().hex
        begun = rt.gate.try_begin_fire(sid, fire_id, token, self.lease_ms)
        if not isinstance(begun, Began):
            log.info("fire pending", extra={"action": "fire.pending", "fire_id": fire_id})
            return "pending"
        self._submit(self._heartbeat_turn, session, fire_id, due_ms, begun.fence, token, deferred)
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
        try:
            rt.store.claim_fence(sid, begun.fence, rt.clock())
        except StaleFence:
            self._reseed(sid, token)
            self.dispatcher.drain(rt.worker, sid)
            return "reseeded"
        self._submit(self._user_session, sid, token, begun.fence)
        return "began"

    # -- turns ----------------------------------------------------------------------------

    def _submit(self, fn: Callable[..., None], *args: Any) -> Future[None]:
        future = self.executor.submit(fn, *args)
        future.add_done_callback(_log_failure)
        return future

    def _heartbeat_turn(
        self,
        session: SessionView,
        fire_id: str,
        due_ms: int,
        fence: int,
        token: str,
        deferred: bool,
    ) -> None:
        with LockKeeper(self.rt.gate, session.id, token, self.lease_ms) as keeper:
            try:
                self._run_fire(session, fire_id, due_ms, fence, keeper, deferred)
            except (TurnAborted, HbgwError) as exc:
                # Lost lock, stale fence, or the reservation was given back meanwhile.
                log.warning("turn aborted: %s", exc, extra={"action": "turn.aborted"})
                return
            except Exception:
                # The store or Redis failed mid-turn: free the session now rather than at the
                # end of the lease; the claim lease brings the fire back.
                log.exception("heartbeat turn crashed", extra={"action": "turn.crashed"})
                with contextlib.suppress(redis.RedisError):
                    self.rt.gate.release(session.id, token)
                return
            self._drain_locked(session.id, token, fence, keeper)

    def _run_fire(
        self,
        session: SessionView,
        fire_id: str,
        due_ms: int,
        fence: int,
        keeper: LockKeeper,
        deferred: bool,
    ) -> None:
        rt, sid = self.rt, session.id
        outcome = rt.store.reserve_fire(
            sid, fire_id, due_ms, fence, rt.clock(), worker=rt.worker, deferred=deferred
        )
        if isinstance(outcome, Duplicate):
            rt.settle(sid)
            return
        if isinstance(outcome, Refused):
            if outcome.reason == "stale_fence":
                # Redis lost its fence counter; SQL remembers the highest one.
                rt.gate.seed(sid, rt.store.max_fence(sid))
                rt.index.schedule(sid, rt.now_ms() + 1000)
            else:
                rt.settle(sid)
            return
        run = outcome.run
        for hook in self.before_start:
            hook(sid, run)
        state = rt.store.get_heartbeat(sid)
        reason = self._refusal(session, run, state, keeper)
        if reason is not None:
            refunded = rt.store.refund(run.id, reason, rt.clock())
            log.info(
                "fire %s %s: %s",
                fire_id,
                refunded.state,
                reason,
                extra={"action": "fire.refund", "fire_id": fire_id},
            )
            self._after_refund(sid, reason)
            return
        rt.store.mark_started(run.id, fence, rt.clock())
        assert state is not None  # _refusal answered "heartbeat changed" otherwise
        self._stamp(sid, "heartbeat:start")
        text = heartbeat_message(state.prompt, state.describe())
        rt.store.add_message(
            sid,
            role="user",
            kind="heartbeat",
            text=text,
            fire_id=fire_id,
            now=rt.clock(),
            fence=fence,
        )
        request = TurnRequest(sid, "heartbeat", text, self._history(sid))
        try:
            reply = self.agent.run(request, lambda phase: self._step(sid, phase, keeper, None))
            result = "silent" if is_silent(reply) else "completed"
        except TurnAborted:
            raise
        except Exception as exc:  # any agent failure is a failed turn, never a silent one
            reply, result = f"⚠ Heartbeat failed: {exc}", "failed"
        keeper.check()
        # Rule 6: to where the heartbeat was set, as a new message (no reply_to).
        address = Address(session.platform, state.origin_chat, state.origin_thread)
        detail = None
        if result != "silent":
            kind = "failure" if result == "failed" else "heartbeat"
            detail = self._deliver(address, reply, sid, kind)
            result = "failed" if detail else result
        rt.store.add_message(
            sid,
            role="assistant",
            kind="assistant" if result != "failed" else "notice",
            text=reply,
            fire_id=fire_id,
            now=rt.clock(),
            fence=fence,
        )
        rt.store.finish(run.id, result, fence, rt.clock(), detail=detail)
        rt.settle(sid)
        self._stamp(sid, "idle")

    def _refusal(
        self,
        before: SessionView,
        run: RunView,
        state: HeartbeatState | None,
        keeper: LockKeeper,
    ) -> str | None:
        """Why this reserved fire must not reach the agent, or None."""
        rt, sid = self.rt, before.id
        if keeper.lost.is_set():
            return "lock lost"
        if rt.gate.estop_active(sid):
            return "emergency stop"
        session = rt.store.get_session(sid)
        if session.status != "active":
            return f"session {session.closed_reason or session.status}"
        if session.conversation != before.conversation:
            return "session reset"
        if state is None or state.generation != run.generation or state.status != "active":
            return "heartbeat changed"
        if rt.registry.owner(sid, rt.now_ms()) != rt.worker:
            return "owner changed"
        return None

    def _after_refund(self, sid: str, reason: str) -> None:
        rt = self.rt
        state = rt.store.get_heartbeat(sid)
        if state is None or state.status != "active":
            rt.settle(sid)
            return
        if reason.startswith("session compressed"):
            child = rt.store.resolve_active(sid)
            rt.settle(child.id)  # the fire executes in the child, at once
            return
        # Back off so a persistent cause of refusal (estop, no route) cannot spin.
        rt.index.schedule(sid, rt.now_ms() + int(rt.settings.refund_backoff * 1000))

    def _user_session(self, sid: str, token: str, fence: int) -> None:
        with LockKeeper(self.rt.gate, sid, token, self.lease_ms) as keeper:
            try:
                self._drain_locked(sid, token, fence, keeper)
            except (TurnAborted, HbgwError) as exc:
                log.warning("turn aborted: %s", exc, extra={"action": "turn.aborted"})
            except Exception:
                log.exception("user turn crashed", extra={"action": "turn.crashed"})
                with contextlib.suppress(redis.RedisError):
                    self.rt.gate.release(sid, token)

    def _drain_locked(self, sid: str, token: str, fence: int, keeper: LockKeeper) -> None:
        """User messages first; then the pending fire; else the session goes idle."""
        rt = self.rt
        while True:
            keeper.check()
            if rt.gate.estop_active(sid):
                rt.gate.release(sid, token)
                return
            message_id = rt.gate.pop_message(sid)
            if message_id is not None:
                self._user_turn(sid, int(message_id), fence, keeper)
                rt.gate.ack_message(sid, message_id)
                continue
            ended = rt.gate.end_turn(sid, token, self.lease_ms)
            if isinstance(ended, KeepLock):
                continue
            if isinstance(ended, LockLost):
                return
            assert isinstance(ended, TurnEnded)
            if ended.pending_fire:
                pending_sid, due_ms = parse_fire_id(ended.pending_fire)
                self.accept_fire(pending_sid, due_ms, deferred=True)
            return

    def _user_turn(self, sid: str, message_id: int, fence: int, keeper: LockKeeper) -> None:
        rt = self.rt
        try:
            message = rt.store.get_message(message_id)
        except NotFound:
            return
        if message.state == "done":
            return  # answered by a turn that died before it could take it off the in-flight list
        session = rt.store.get_session(sid)
        address = Address(session.platform, session.chat, session.thread, str(message_id))
        self._best_effort(self.channel.typing, address, session_id=sid)
        self._stamp(sid, "user:start")
        request = TurnRequest(sid, "user", message.text, self._history(sid, before=message_id))
        try:
            reply = self.agent.run(request, lambda phase: self._step(sid, phase, keeper, address))
            kind = "reply"
            if not reply.strip() or is_silent(reply):
                # Rule 7: a human gets a visible notice, never silence.
                reply, kind = EMPTY_REPLY_NOTICE, "notice"
        except TurnAborted:
            raise
        except Exception as exc:
            reply, kind = f"⚠ The turn failed: {exc}", "failure"
        keeper.check()
        undelivered = self._deliver(address, reply, sid, kind)
        rt.store.add_message(
            sid,
            role="assistant",
            kind="assistant" if kind == "reply" and not undelivered else "notice",
            text=reply,
            reply_to=message_id,
            now=rt.clock(),
            fence=fence,
        )
        rt.store.mark_message_done(message_id, fence=fence)
        self._stamp(sid, "idle")

    # -- helpers --------------------------------------------------------------------------

    @staticmethod
    def _best_effort(call: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        """Typing indicators and progress are cosmetic: a failing platform must not stop a turn."""
        try:
            call(*args, **kwargs)
        except Exception as exc:
            log.debug("channel signal failed: %s", exc, extra={"action": "deliver.signal_failed"})

    def _deliver(self, address: Address, text: str, sid: str, kind: str) -> str | None:
        """Send; a platform failure is recorded on the turn, never left to kill the session."""
        try:
            self.channel.send(address, text, session_id=sid, kind=kind)
        except Exception as exc:
            log.warning(
                "delivery to %s failed: %s", address.chat, exc, extra={"action": "deliver.failed"}
            )
            return f"delivery failed: {exc}"
        return None

    def _step(self, sid: str, phase: str, keeper: LockKeeper, address: Address | None) -> None:
        keeper.check()
        self._stamp(sid, phase)
        if address is not None:  # rule 8: heartbeat turns pass no address, so show nothing
            self._best_effort(self.channel.progress, address, phase, session_id=sid)

    def _stamp(self, sid: str, phase: str) -> None:
        try:
            self.rt.liveness.stamp(sid, self.rt.now_ms(), phase, self.rt.worker)
        except Exception:  # a stamp must never break a turn
            log.debug("liveness stamp failed", exc_info=True)

    def _history(self, sid: str, before: int | None = None) -> tuple[tuple[str, str], ...]:
        messages = self.rt.store.list_messages(sid, limit=HISTORY_TURNS)
        return tuple((m.role, m.text) for m in messages if before is None or m.id < before)

    def _reseed(self, sid: str, token: str) -> None:
        self.rt.gate.seed(sid, self.rt.store.max_fence(sid))
        self.rt.gate.release(sid, token)


def _log_failure(future: Future[None]) -> None:
    exc = future.exception()
    if exc is not None and not isinstance(exc, HbgwError):
        log.error("turn crashed", exc_info=exc, extra={"action": "turn.crashed"})
