"""One heartbeat turn under a held lock, on the turn skeleton (``workers/turn.py``).

begin: the lock, with the emergency stop and the owner read in its round trip
(``turn_redis.begin_fire``) → one SQL transaction (``begin_fire``): claim the fence, reserve,
re-check (heartbeat active and due, session active and not reset, then what Redis read) and
either give the reservation back at once or mark it started with the prompt stored. Then the
skeleton: agent → confirm the lock (Redis) and mark
delivering, fenced, the delivery record ``pending`` (quiet: nothing to deliver, the record
``suppressed``) → deliver if that confirmation is young enough (rule 6: to the origin, no
reply_to) → finish with the reply and the delivery's outcome stored (one SQL transaction, which
also answers the next due time) → the due index written with the drain's next step.

A turn that finds its lock lost after the start ends its run ``failed`` (``LostLockDetail``)
with a fenced write; if a newer grant exists, that grant's claim has already done so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from hbgw.core.clock import Clock, to_ms
from hbgw.core.errors import StaleFence
from hbgw.core.metrics import count_delivery, gateway_metrics
from hbgw.sessions.dedupe import DUPLICATE_DETAIL, is_duplicate, reply_hash
from hbgw.sessions.heartbeat import HeartbeatState
from hbgw.sessions.states import DeliveryState, HeartbeatStatus, RefundReason, RunState
from hbgw.sessions.store import Ledger
from hbgw.sessions.views import (
    DeliveryOutcome,
    Duplicate,
    FireStart,
    NotStarted,
    ReplyStart,
    RunView,
    SessionView,
    Started,
)
from hbgw.state.due_settle import DueSettle
from hbgw.workers.agents.base import TurnRequest
from hbgw.workers.heartbeat_end import (
    budget_notice,
    budget_reason,
    end_notice,
    split_done,
    with_notice,
)
from hbgw.workers.heartbeat_tools import SessionHeartbeatTools
from hbgw.workers.injection import heartbeat_message, is_silent
from hbgw.workers.locks import Lease
from hbgw.workers.logfields import fields, log
from hbgw.workers.ports import Address
from hbgw.workers.turn import Composed, Outgoing, Sent, Turn
from hbgw.workers.turn_io import HISTORY_TURNS, Answer, Delivery, TurnIO, conversation_before
from hbgw.workers.turn_redis import after_finish

# Test seams (they stage races): ``BeforeBeginHook`` runs on the turn thread before the lock's
# round trip, so the re-check reads what it changed (in Redis with the lock, in SQL in the one
# transaction); ``AfterStartHook`` runs once that transaction started the run, before the agent.
BeforeBeginHook = Callable[[str, str], None]  # session id, fire id
AfterStartHook = Callable[[str, RunView], None]


def _prompt(state: HeartbeatState) -> str:
    """The turn's message, written from the state the reservation reads (rule 5)."""
    return heartbeat_message(state.prompt, state.schedule.describe())


def settle_duplicate(
    due: DueSettle, clock: Clock, session_id: str, run: RunView, next_due: datetime | None
) -> None:
    """A fire whose id the ledger already holds: bring the due index back to the truth.

    A refunded fire never happened, and its refund put the previous anchor back, so the true
    next due time is that fire's own due time — and so is its id. Settling to it would claim
    the same id again, meet the same refunded row and settle again, forever (after Redis lost
    the index and the restore pass wrote that due time back). It is due now, under a new id.
    ``next_due``: the due time SQL answered in the transaction that found the duplicate.
    """
    if RunState(run.state) is RunState.REFUNDED:
        refunded_due = to_ms(run.due_at) if run.due_at is not None else 0
        due.index.schedule(session_id, max(to_ms(clock()), refunded_due + 1))
    else:
        due.apply(session_id, next_due)  # what SQL answered with the duplicate: no new read


def grant_refusal(worker: str, lease: Lease) -> RefundReason | None:
    """What Redis said with a fire's lock (``turn_redis.begin_fire``, ``begin_job``): the lock,
    the emergency stop, then the owner; SQL weighs it after the session's own reasons."""
    seen = lease.grant.seen
    if lease.keeper.lost.is_set():
        return RefundReason.LOCK_LOST
    if seen is None:  # not a fire's grant: nothing was read with it
        return None
    if seen.estop:
        return RefundReason.EMERGENCY_STOP
    return RefundReason.OWNER_CHANGED if seen.owner != worker else None


def is_active(state: HeartbeatState | None) -> bool:
    # Through the enum's constructor: right whether the state holds the text or the member.
    return state is not None and HeartbeatStatus(state.status) is HeartbeatStatus.ACTIVE


@dataclass(frozen=True)
class Fire:
    """An admitted fire: the session as admission saw it, and the fire's identity."""

    session: SessionView
    fire_id: str
    due_ms: int
    deferred: bool


@dataclass(frozen=True)
class Begun:
    """A started heartbeat turn: its fire, the run and prompt SQL answered, where it goes."""

    fire: Fire
    started: Started
    address: Address
    tools: SessionHeartbeatTools


class HeartbeatTurn(Turn[Begun]):
    kind = "heartbeat"

    def __init__(
        self,
        io: TurnIO,
        ledger: Ledger,
        *,
        refund_backoff_ms: int,
        after_start: list[AfterStartHook],
    ) -> None:
        super().__init__(io)
        self.ledger = ledger
        self.refund_backoff_ms = refund_backoff_ms
        self.after_start = after_start

    def begin(self, lease: Lease, fire: Fire) -> Begun | None:
        """At the lock grant, one transaction: claim its fence, reserve the fire, re-check it and
        start it (or give it back at once); None when it does not start (the index settled)."""
        p, sid = self.parts, lease.session_id
        begun = self.ledger.begin_fire(
            sid,
            lease.fence,
            fire.fire_id,
            fire.due_ms,
            p.clock(),
            FireStart(
                fire.session.conversation,
                _prompt,
                HISTORY_TURNS,
                refusal=self._refusal(lease),
                worker=p.worker,
                deferred=fire.deferred,
            ),
        )
        count_delivery(
            self.io.label(fire.session.platform), DeliveryState.UNKNOWN.value, begun.unknown
        )
        outcome = begun.outcome
        if isinstance(outcome, Started):
            return self._begun(lease, fire, outcome)
        if isinstance(outcome, NotStarted):
            self._refunded(fire, outcome)
        elif isinstance(outcome, Duplicate):
            settle_duplicate(p.due, p.clock, sid, outcome.run, begun.next_due)
        else:
            log.info(
                "fire %s refused: %s",
                fire.fire_id,
                outcome.reason,
                extra=fields("fire.refused", sid, fire.fire_id),
            )
            p.due.apply(sid, begun.next_due)  # what SQL said in that transaction: no new read
        return None

    def run(self, lease: Lease, begun: Begun) -> None:
        for hook in self.after_start:
            hook(lease.session_id, begun.started.run)
        self.execute(lease, begun)

    # -- begin under the lock: the re-check's Redis part, the start ----------------------------

    def _refusal(self, lease: Lease) -> RefundReason | None:
        return grant_refusal(self.parts.worker, lease)

    def _begun(self, lease: Lease, fire: Fire, started: Started) -> Begun:
        gateway_metrics().fire_lag.observe(max(0, self.parts.now_ms() - fire.due_ms) / 1000)
        self.io.hold_stamp(lease, "heartbeat:start")
        state = started.state
        # Rule 6: to where the heartbeat was set, as a new message (no reply_to).
        session = fire.session
        address = Address(
            session.platform, state.origin_chat, state.origin_thread, owner=session.owner
        )
        # The same tools as a user turn (rule 5); writes refuse to run in a heartbeat turn.
        tools = self.io.toolbox(lease.session_id, "heartbeat", address)
        return Begun(fire, started, address, tools)

    def _refunded(self, fire: Fire, refunded: NotStarted) -> None:
        """After a refund: count it, and put the index right from the heartbeat it left."""
        p, sid, reason, state = self.parts, fire.session.id, refunded.reason, refunded.state
        count_refund(reason)
        log.info(
            "fire %s %s: %s",
            fire.fire_id,
            refunded.run.state,
            reason,
            extra=fields("fire.refund", sid, fire.fire_id),
        )
        if not is_active(state):
            p.due.settle(sid)
        else:
            # Back off so a persistent cause of refusal (estop, no route) cannot spin.
            p.due.index.schedule(sid, p.now_ms() + self.refund_backoff_ms)

    # -- the skeleton's steps -----------------------------------------------------------------

    def request(self, plan: Begun) -> TurnRequest:
        injected = plan.started.message
        history = conversation_before(injected, plan.started.history)
        sid, model = plan.fire.session.id, plan.started.state.policy.model
        return TurnRequest(
            sid, "heartbeat", injected.text, history, heartbeat=plan.tools, model=model
        )

    def progress_to(self, plan: Begun) -> Address | None:
        return None  # rule 8: no typing or progress during a heartbeat turn

    def address(self, plan: Begun) -> Address:
        return plan.address

    def compose(self, plan: Begun, answer: Answer) -> Composed:
        fid = plan.fire.fire_id
        notice = _notice(plan, answer)  # this fire is the last, or spends the budget: say so
        if answer.failure is not None:
            text = with_notice(f"⚠ Heartbeat failed: {answer.failure}", notice)
            return Composed(answer, Outgoing(text, Delivery("failure", fid, fire_id=fid)))
        body = split_done(answer.text)[0]
        if is_silent(body) or self._repeats(plan, body):
            if notice is None:
                return Composed(answer, None, suppressed_key=fid)
            return Composed(answer, Outgoing(notice, Delivery("heartbeat", fid, fire_id=fid)))
        text = with_notice(body, notice)
        return Composed(answer, Outgoing(text, Delivery("heartbeat", fid, fire_id=fid)))

    def _repeats(self, plan: Begun, body: str) -> bool:
        """Dedupe: the same reply as the last one delivered on this route, within the window."""
        return is_duplicate(plan.started.state, self._hash(plan, body), self.parts.clock())

    def _hash(self, plan: Begun, body: str) -> str:
        address = plan.address
        return reply_hash(address.platform, address.chat, address.thread, body)

    def mark(self, lease: Lease, plan: Begun, composed: Composed) -> ReplyStart | None:
        # SQL agrees this turn still holds the session (a stale turn's StaleFence ends it here,
        # sending nothing). A fire is never sent by two grants: a newer one ends a `delivering`
        # run `failed`, its delivery `unknown`.
        assert composed.reply is not None
        kind = composed.reply.delivery.kind
        run = plan.started.run
        self.ledger.mark_delivering(
            run.key,
            lease.fence,
            self.parts.clock(),
            channel=self.io.label(plan.address.platform),
            kind=kind,
        )
        return ReplyStart(possible_repeat=False)  # a fire is sent by one grant only

    def finish(
        self,
        lease: Lease,
        plan: Begun,
        composed: Composed,
        sent: Sent | None,
        outcome: DeliveryOutcome,
    ) -> None:
        sid, fid, answer = lease.session_id, plan.fire.fire_id, composed.answer
        body, detail = split_done(answer.text)[0], None
        if outcome.state is DeliveryState.FAILED:
            detail = outcome.error
        if sent is None:
            reply, result = answer.text, RunState.SILENT  # kept for the record, never sent
            detail = None if is_silent(body) else DUPLICATE_DETAIL  # else a held-back repeat
        else:
            reply = sent.reply.text
            failed = answer.failure is not None or outcome.state is DeliveryState.FAILED
            result = RunState.FAILED if failed else RunState.COMPLETED
        left = outcome.state in (DeliveryState.SENT, DeliveryState.RETRYING)
        spoke = left and answer.failure is None and not is_silent(body)
        # One fenced transaction: the outcome, what the turn spent (failed turns included:
        # heartbeats cost money), the reply, the delivery's outcome, and the due time the
        # index gets without a read.
        finished = self.ledger.finish_fire(
            plan.started.run.key,
            result,
            lease.fence,
            self.parts.clock(),
            reply=reply,
            reply_kind="notice" if result is RunState.FAILED else "assistant",
            detail=detail,
            usage=answer.usage,
            delivered=outcome,
            channel=self.io.label(plan.address.platform),
            # The marker or the policy's end clears it with the reply that said so; a spent
            # budget pauses it.
            end_heartbeat=end_notice(plan.started.state, answer) is not None,
            pause_reason=_budget(plan, answer),
            quiet=sent is None,
            delivered_hash=self._hash(plan, body) if spoke else None,
        )
        count_tokens(answer, paused=_budget(plan, answer) is not None)
        gateway_metrics().fires.labels(result.value).inc()
        log.info("fire %s %s", fid, result, extra=fields("fire.done", sid, fid))
        # With the drain's next step, in its round trip: the answer reaches the API's event
        # streams (if it left), the index gets the due time SQL answered, the stamp is idle.
        after_finish(self.parts, lease, finished.next_due, wake=sent is not None)

    def aborted(self, lease: Lease, plan: Begun, mark: ReplyStart | None, sent: int) -> None:
        gateway_metrics().fires.labels(RunState.FAILED.value).inc()
        # The lock is gone but perhaps nobody holds it yet: the fence still lets this turn say
        # how its run ended. StaleFence: a newer grant said it at its claim. ``sent`` 0: the
        # turn stopped at a check before its one send (its delivery, if marked, ``failed``);
        # 1: the send guard stopped it mid-send, after a request that may have left (the run
        # ``lock lost during delivery``, its delivery ``unknown``).
        run = plan.started.run
        nothing_sent = sent == 0
        with contextlib.suppress(StaleFence):
            self.ledger.settle_lost(
                run.key, lease.fence, self.parts.clock(), nothing_sent=nothing_sent
            )
        if mark is not None:
            state = DeliveryState.FAILED if nothing_sent else DeliveryState.UNKNOWN
            count_delivery(self.io.label(plan.address.platform), state.value)


def _budget(plan: Begun, answer: Answer) -> str | None:
    return budget_reason(plan.started.state, plan.started.spent_today, answer)


def _notice(plan: Begun, answer: Answer) -> str | None:
    """The end's notice, else the spent budget's (an end clears: nothing is left to pause)."""
    ended = end_notice(plan.started.state, answer)
    reason = None if ended else _budget(plan, answer)
    return budget_notice(reason) if reason else ended


def count_tokens(answer: Answer, *, paused: bool) -> None:
    metrics = gateway_metrics()
    if answer.usage is not None:
        metrics.heartbeat_tokens.inc(answer.usage.total_tokens)
    if paused:
        metrics.budget_pauses.inc()


def count_refund(reason: RefundReason) -> None:
    """A refunded fire ended too: counted by outcome and by reason (the reason's name as label,
    ``emergency_stop``, so alert rules need no quoting of spaces)."""
    metrics = gateway_metrics()
    metrics.fires.labels(RunState.REFUNDED.value).inc()
    metrics.refunds.labels(reason.name.lower()).inc()
