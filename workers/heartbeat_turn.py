"""One heartbeat turn under a held lock.

reserve in SQL with the fence → re-check session, conversation, generation, owner, estop (else
refund) → mark started → agent → mark delivering, fenced (quiet: nothing to deliver) → deliver
(rule 6: to the origin, no reply_to) → finish → settle the due index.

A turn that finds its lock lost after the start ends its run ``failed`` (``LostLockDetail``)
with a fenced write; if a newer grant exists, that grant's claim has already done so.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from core.clock import to_ms
from core.errors import StaleFence, TurnAborted
from core.metrics import gateway_metrics
from core.usage import TokenUsage
from sessions.heartbeat import HeartbeatState
from sessions.states import (
    ClosedReason,
    HeartbeatStatus,
    RefundReason,
    RunState,
    SessionStatus,
)
from sessions.views import Duplicate, RefusalReason, Refused, RunView, SessionView
from state.runtime import Runtime
from workers.agents.base import TurnRequest
from workers.injection import heartbeat_message, is_silent
from workers.locks import Lease
from workers.logfields import fields, log
from workers.ports import Address
from workers.turn_io import TurnIO

# Test seam: called after a reservation, before the re-check (simulates races).
BeforeStartHook = Callable[[str, RunView], None]

_DEPARTED: dict[str, RefundReason] = {
    ClosedReason.COMPRESSED: RefundReason.SESSION_COMPRESSED,
    ClosedReason.SWITCHED: RefundReason.SESSION_SWITCHED,
}


def settle_duplicate(rt: Runtime, session_id: str, run: RunView) -> None:
    """A fire whose id the ledger already holds: bring the due index back to the truth.

    A refunded fire never happened, and its refund put the previous anchor back, so the true
    next due time is that fire's own due time — and so is its id. Settling to it would claim
    the same id again, meet the same refunded row and settle again, forever (after Redis lost
    the index and the restore pass wrote that due time back). It is due now, under a new id.
    """
    if RunState(run.state) is RunState.REFUNDED:
        refunded_due = to_ms(run.due_at) if run.due_at is not None else 0
        rt.index.schedule(session_id, max(rt.now_ms(), refunded_due + 1))
    else:
        rt.settle(session_id)


def is_active(state: HeartbeatState | None) -> bool:
    # Through the enum's constructor: right whether the state holds the text or the member.
    return state is not None and HeartbeatStatus(state.status) is HeartbeatStatus.ACTIVE


@dataclass(frozen=True)
class Outcome:
    """How the agent's part of a heartbeat turn ended: what to send, the run's state, the cost."""

    reply: str
    result: RunState
    usage: TokenUsage | None = None


@dataclass(frozen=True)
class Fire:
    """An admitted fire: the session as admission saw it, and the fire's identity."""

    session: SessionView
    fire_id: str
    due_ms: int
    deferred: bool


class HeartbeatTurn:
    def __init__(self, io: TurnIO, before_start: list[BeforeStartHook]) -> None:
        self.io = io
        self.rt = io.rt
        self.before_start = before_start

    def run(self, lease: Lease, fire: Fire) -> None:
        run = self._reserve(lease, fire)
        if run is None:
            return
        sid = lease.session_id
        for hook in self.before_start:
            hook(sid, run)
        state = self.rt.store.get_heartbeat(sid)
        reason = self._refusal(lease, fire.session, run, state)
        if reason is not None:
            self._refund(fire, run, reason)
            return
        assert state is not None  # _refusal answered HEARTBEAT_CHANGED otherwise
        self._execute(lease, fire, run, state)

    def _reserve(self, lease: Lease, fire: Fire) -> RunView | None:
        """The reservation, fenced by the claim the session loop made at the lock grant."""
        rt, sid = self.rt, lease.session_id
        outcome = rt.store.reserve_fire(
            sid,
            fire.fire_id,
            fire.due_ms,
            lease.fence,
            rt.clock(),
            worker=rt.worker,
            deferred=fire.deferred,
        )
        if isinstance(outcome, Duplicate):
            settle_duplicate(rt, sid, outcome.run)
            return None
        if isinstance(outcome, Refused):
            log.info(
                "fire %s refused: %s",
                fire.fire_id,
                outcome.reason,
                extra=fields("fire.refused", sid, fire.fire_id),
            )
            if outcome.reason == RefusalReason.STALE_FENCE:
                raise StaleFence(f"Session {sid} is fenced past this grant; the fire stops here.")
            rt.settle(sid)
            return None
        return outcome.run

    def _refusal(
        self, lease: Lease, before: SessionView, run: RunView, state: HeartbeatState | None
    ) -> RefundReason | None:
        """Why this reserved fire must not reach the agent, or None."""
        rt, sid = self.rt, before.id
        if lease.keeper.lost.is_set():
            return RefundReason.LOCK_LOST
        if rt.gate.estop_active(sid):
            return RefundReason.EMERGENCY_STOP
        session = rt.store.get_session(sid)
        if session.status == SessionStatus.SUSPENDED:
            return RefundReason.SESSION_SUSPENDED
        if session.status != SessionStatus.ACTIVE:
            return _DEPARTED.get(session.closed_reason or "", RefundReason.SESSION_CLOSED)
        if session.conversation != before.conversation:
            return RefundReason.SESSION_RESET
        if state is None or state.generation != run.generation or not is_active(state):
            return RefundReason.HEARTBEAT_CHANGED
        if rt.registry.owner(sid, rt.now_ms()) != rt.worker:
            return RefundReason.OWNER_CHANGED
        return None

    def _refund(self, fire: Fire, run: RunView, reason: RefundReason) -> None:
        rt, sid = self.rt, fire.session.id
        refunded = rt.store.refund(run.id, reason, rt.clock())
        count_refund(reason)
        log.info(
            "fire %s %s: %s",
            fire.fire_id,
            refunded.state,
            reason,
            extra=fields("fire.refund", sid, fire.fire_id),
        )
        state = rt.store.get_heartbeat(sid)
        if not is_active(state):
            rt.settle(sid)
        elif reason is RefundReason.SESSION_COMPRESSED:
            rt.settle(rt.store.resolve_active(sid).id)  # the fire executes in the child, at once
        else:
            # Back off so a persistent cause of refusal (estop, no route) cannot spin.
            rt.index.schedule(sid, rt.now_ms() + int(rt.settings.refund_backoff * 1000))

    def _execute(self, lease: Lease, fire: Fire, run: RunView, state: HeartbeatState) -> None:
        self.rt.store.mark_started(run.id, lease.fence, self.rt.clock())
        metrics, started = gateway_metrics(), time.monotonic()
        metrics.fire_lag.observe(max(0, self.rt.now_ms() - fire.due_ms) / 1000)
        try:
            self._started(lease, fire, run, state)
        except TurnAborted:
            metrics.fires.labels(RunState.FAILED.value).inc()
            # The lock is gone but perhaps nobody holds it yet: the fence still lets this turn
            # say how its run ended. StaleFence: a newer grant said it at its claim.
            with contextlib.suppress(StaleFence):
                self.rt.store.settle_lost(run.id, lease.fence, self.rt.clock())
            raise
        finally:
            metrics.turn_duration.labels("heartbeat").observe(time.monotonic() - started)

    def _started(self, lease: Lease, fire: Fire, run: RunView, state: HeartbeatState) -> None:
        rt, io, sid, fence = self.rt, self.io, lease.session_id, lease.fence
        io.stamp(sid, "heartbeat:start")
        text = heartbeat_message(state.prompt, state.describe())
        injected = rt.store.add_message(
            sid,
            role="user",
            kind="heartbeat",
            text=text,
            fire_id=fire.fire_id,
            now=rt.clock(),
            fence=fence,
        )
        # Rule 6: to where the heartbeat was set, as a new message (no reply_to).
        address = Address(fire.session.platform, state.origin_chat, state.origin_thread)
        # The same tools as a user turn (rule 5); writes refuse to run in a heartbeat turn.
        tools = io.toolbox(sid, "heartbeat", address)
        request = TurnRequest(sid, "heartbeat", text, io.history(injected), heartbeat=tools)
        answer = io.ask(lease, request, None)
        reply = answer.text
        if answer.failure is not None:
            reply, result = f"⚠ Heartbeat failed: {answer.failure}", RunState.FAILED
        else:
            result = RunState.SILENT if is_silent(reply) else RunState.COMPLETED
        self._conclude(lease, fire, run, address, Outcome(reply, result, answer.usage))

    def _conclude(
        self, lease: Lease, fire: Fire, run: RunView, address: Address, outcome: Outcome
    ) -> None:
        rt, io, sid, fence = self.rt, self.io, lease.session_id, lease.fence
        reply, result, detail = outcome.reply, outcome.result, None
        if result is not RunState.SILENT:
            # Nothing leaves before SQL agrees this turn still holds the session (a stale
            # turn's StaleFence ends it here, sending nothing).
            lease.keeper.confirm()
            rt.store.mark_delivering(run.id, fence, rt.clock())
            kind = "failure" if result is RunState.FAILED else "heartbeat"
            detail = io.deliver(address, reply, sid, kind, fire.fire_id)
            result = RunState.FAILED if detail else result
        rt.store.add_message(
            sid,
            role="assistant",
            kind="notice" if result is RunState.FAILED else "assistant",
            text=reply,
            fire_id=fire.fire_id,
            now=rt.clock(),
            fence=fence,
        )
        # Heartbeats cost money: what the turn spent is on its run, failed turns included.
        rt.store.finish(run.id, result, fence, rt.clock(), detail=detail, usage=outcome.usage)
        gateway_metrics().fires.labels(RunState(result).value).inc()
        log.info("fire %s %s", fire.fire_id, result, extra=fields("fire.done", sid, fire.fire_id))
        rt.settle(sid)
        io.stamp(sid, "idle")


def count_refund(reason: RefundReason) -> None:
    """A refunded fire ended too: counted by outcome and by reason (the reason's name as label,
    ``emergency_stop``, so alert rules need no quoting of spaces)."""
    metrics = gateway_metrics()
    metrics.fires.labels(RunState.REFUNDED.value).inc()
    metrics.refunds.labels(reason.name.lower()).inc()
