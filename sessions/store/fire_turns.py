"""The fire path's SQL, one transaction per step of a heartbeat turn.

A fire costs four transactions (three when the agent stays silent), each returning everything
the next step needs, so no step reads again what the one before read:

1. ``admit_fires`` (admission, one transaction for a task's whole batch): for each fire the
   active session of the conversation, whether the ledger has the fire, the heartbeat and the
   due time the index should hold;
2. ``claim_fire`` (the lock was granted): claim the grant's fence and reserve the fire;
3. ``start_fire`` (after the re-check's Redis part): re-check the session and the heartbeat,
   then either refund the reservation or mark it started and inject the prompt message, and
   read the conversation the agent sees;
4. ``mark_delivering`` (``ledger.py``, with the delivery record ``pending``), then
   ``finish_fire``: the outcome, the stored reply, the delivery's outcome and the next due time
   for the index.

Every write is fenced as in ``ledger.py`` (``claim_fire`` claims the fence itself); the steps
themselves are the functions of ``ledger_steps.py``, each run inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from core.errors import NotFound
from core.usage import TokenUsage
from sessions import heartbeat as hb
from sessions.models import HeartbeatRow, MessageRow, RunRow, SessionRow
from sessions.states import (
    ClosedReason,
    HeartbeatStatus,
    MessageState,
    RefundReason,
    RunState,
    SessionStatus,
)
from sessions.store.base import Transactions, fenced_session_row, heartbeat_row, repeatable, run_row
from sessions.store.deliveries import (
    DeliveryOutcome,
    Outbound,
    Owner,
    insert_suppressed_in,
    record_outcome_in,
)
from sessions.store.heartbeat_costs import tokens_on_day_in
from sessions.store.heartbeat_records import apply_state, heartbeat_state
from sessions.store.ledger_steps import (
    claim_in,
    finish_in,
    finished_outcome,
    refund_in,
    refund_reason,
    reserve_in,
    run_by_fire_id,
    start_in,
)
from sessions.store.message_records import MessageView, message_view
from sessions.store.run_views import ReserveOutcome, RunView, run_view
from sessions.store.session_records import SessionView, resolve_active_row, session_view

_DEPARTED: dict[str, RefundReason] = {
    ClosedReason.COMPRESSED: RefundReason.SESSION_COMPRESSED,
    ClosedReason.SWITCHED: RefundReason.SESSION_SWITCHED,
}


@dataclass(frozen=True)
class FireAdmission:
    """What admission decides from: ``next_due`` is what the due index should hold for
    ``session`` (None: no entry), as ``Runtime.settle`` would compute it."""

    session: SessionView
    existing: RunView | None  # the ledger's run of this fire id: a duplicate delivery
    state: hb.HeartbeatState | None
    next_due: datetime | None


@dataclass(frozen=True)
class FireClaim:
    """The fence is claimed; ``outcome`` is the reservation; ``state`` the heartbeat after it;
    ``unknown``: deliveries of older turns the claim found cut off."""

    outcome: ReserveOutcome
    state: hb.HeartbeatState | None
    next_due: datetime | None
    unknown: int = 0


@dataclass(frozen=True)
class Started:
    """The run is started and its prompt stored: ``history`` is the conversation before it,
    oldest first (at most the number asked for)."""

    run: RunView
    state: hb.HeartbeatState
    message: MessageView
    history: list[MessageView]
    spent_today: int = 0
    """Tokens the heartbeat's runs spent on this UTC day before this one (``heartbeat_costs``)."""


@dataclass(frozen=True)
class NotStarted:
    """The re-check refused the fire: the run is refunded (or abandoned) with ``reason``;
    ``state`` is the session's heartbeat after it."""

    reason: RefundReason
    run: RunView
    state: hb.HeartbeatState | None


@dataclass(frozen=True)
class Finished:
    run: RunView
    next_due: datetime | None


class FireTurns(Transactions):
    def admit_fires(self, fires: Sequence[tuple[str, str]]) -> list[FireAdmission | None]:
        """For each (session id, fire id): follow compression, look the fire up in the ledger,
        read the heartbeat; None for a session that does not exist. One read-only transaction
        for the batch: a task carries up to a worker's share of a tick."""
        with self._transaction() as db:
            return [_admission_in(db, session_id, fire_id) for session_id, fire_id in fires]

    def claim_fire(
        self,
        session_id: str,
        fence: int,
        fire_id: str,
        due_ms: int,
        now: datetime,
        *,
        worker: str | None = None,
        deferred: bool = False,
    ) -> FireClaim:
        """Claim the grant's fence (as ``claim_fence``) and reserve the fire, in one transaction:
        the claim holds whatever the reservation answers (a refused one included), and
        StaleFence (a fence not newer than the session's) reserves nothing."""
        try:
            return self._claim_fire(session_id, fence, fire_id, due_ms, now, worker, deferred)
        except IntegrityError:
            # A concurrent reserve of the same fire id won the UNIQUE race and rolled our
            # claim back with it: again, the fire is a duplicate now.
            return self._claim_fire(session_id, fence, fire_id, due_ms, now, worker, deferred)

    def _claim_fire(
        self,
        session_id: str,
        fence: int,
        fire_id: str,
        due_ms: int,
        now: datetime,
        worker: str | None,
        deferred: bool,
    ) -> FireClaim:
        with self._transaction() as db:
            claimed = claim_in(db, session_id, fence, now)
            session = claimed.session
            row = heartbeat_row(db, session_id)
            outcome = reserve_in(db, session, fire_id, due_ms, fence, now, worker, deferred, row)
            state = heartbeat_state(row) if row else None
            return FireClaim(outcome, state, index_due(session, row), claimed.unknown)

    @repeatable
    def start_fire(
        self,
        run_id: int,
        fence: int,
        now: datetime,
        *,
        conversation: int,
        owner_changed: bool,
        prompt: str,
        history: int,
    ) -> Started | NotStarted:
        """The re-check after a reservation, fenced: refund with the first reason that holds
        (session suspended or gone, conversation reset, heartbeat changed, then
        ``owner_changed``), else mark the run started and store ``prompt`` as the turn's
        message. ``conversation``: the session's conversation when the fire was admitted."""
        with self._transaction() as db:
            run = run_row(db, run_id)
            session = fenced_session_row(db, run.session_id, fence)
            row = heartbeat_row(db, session.id)
            state = heartbeat_state(row) if row else None
            if run.state == RunState.STARTED and run.fence == fence:
                assert state is not None  # it started: the re-check found the heartbeat
                message = _prompt_of(db, run)  # a repeat after a COMMIT whose answer was lost
                before = _before(db, message, history)
                return Started(run_view(run), state, message, before, _spent(db, run, state))
            reason = _refusal(session, row, run, conversation, owner_changed)
            if reason is not None:
                if run.state != RunState.RESERVED and run.detail == reason.value:
                    return NotStarted(reason, run_view(run), state)  # a repeat, as above
                refund_in(db, run, reason, now)
                return NotStarted(reason, run_view(run), state)
            assert state is not None  # _refusal answered HEARTBEAT_CHANGED otherwise
            start_in(run, now)
            message = _add_message(db, session, run, "user", "heartbeat", prompt, now)
            before = _before(db, message, history)
            return Started(run_view(run), state, message, before, _spent(db, run, state))

    def refund_fire(self, run_id: int, reason: RefundReason, now: datetime) -> NotStarted:
        """Give back a reservation that never reached the agent, answering the session's heartbeat
        after it (for the index) as well.

        Only when nothing newer happened: same generation and the anchor still the one this
        reservation set. Otherwise the run is ``abandoned`` and the newer state wins.
        """
        why = refund_reason(reason)
        with self._transaction() as db:
            run = run_row(db, run_id)
            refund_in(db, run, why, now)
            row = heartbeat_row(db, run.session_id)
            return NotStarted(why, run_view(run), heartbeat_state(row) if row else None)

    @repeatable
    def finish_fire(
        self,
        run_id: int,
        outcome: RunState,
        fence: int,
        now: datetime,
        *,
        reply: str,
        reply_kind: str,
        detail: str | None = None,
        usage: TokenUsage | None = None,
        delivered: DeliveryOutcome | None = None,
        channel: str = "",
        end_heartbeat: bool = False,
        pause_reason: str | None = None,
        quiet: bool = False,
        delivered_hash: str | None = None,
    ) -> Finished:
        """Record how a started run ended (``outcome``: one of ``states.FINISHED``) and the turn's
        reply as a message, fenced, in one transaction; with the due time the index should hold
        now. ``usage``: the tokens the turn spent, failed turns included — in the same fenced
        transaction, so a stale turn records nothing. ``delivered``: the outcome of the send
        for the pending record ``mark_delivering`` wrote, or, for a reply never marked (silence),
        a ``suppressed`` record through ``channel``. ``end_heartbeat``: this fire was its
        heartbeat's last (completion marker, ``times``, ``for``): cleared in the same
        transaction, only the generation that fired. ``pause_reason``: this fire spent its
        heartbeat's token budget for the day: paused with that reason, likewise. ``quiet`` and
        ``delivered_hash``: for backoff and dedupe (``hb.after_reply``)."""
        final = finished_outcome(outcome)
        with self._transaction() as db:
            run = run_row(db, run_id)
            session = fenced_session_row(db, run.session_id, fence)
            # Finished already: a repeat after a COMMIT whose answer was lost (reply included).
            row = None
            if run.state != final:
                if delivered is not None:
                    _record_delivery(db, run, fence, channel, delivered, now)
                row = finish_in(db, run, final, now, detail, usage)
                if row is not None and _fired_by(row, run):
                    state = hb.after_reply(
                        heartbeat_state(row), quiet=quiet, delivered_hash=delivered_hash, now=now
                    )
                    apply_state(row, state, now)
                    if end_heartbeat or pause_reason:
                        _end_or_pause(row, pause_reason if not end_heartbeat else None, now)
                _add_message(db, session, run, "assistant", reply_kind, reply, now)
            # The run's heartbeat (finish_in read it) is the session's unless it moved on.
            if row is None or row.session_id != session.id:
                row = heartbeat_row(db, session.id)
            return Finished(run_view(run), index_due(session, row))


def _spent(db: Session, run: RunRow, state: hb.HeartbeatState) -> int:
    """Tokens of the run's heartbeat today (its own are not recorded yet: it has not finished);
    0 without a budget, which is all they are read for (no query on an uncapped fire)."""
    if run.heartbeat_id is None or not state.policy.budget:
        return 0
    return tokens_on_day_in(db, run.heartbeat_id, run.reserved_at)


def _end_or_pause(row: HeartbeatRow, pause_reason: str | None, now: datetime) -> None:
    """Clear the heartbeat (its end), or pause it with ``pause_reason`` (its budget) if active."""
    state = heartbeat_state(row)
    if pause_reason is None:
        apply_state(row, hb.clear(state, now), now)
    elif row.status == HeartbeatStatus.ACTIVE:
        apply_state(row, hb.pause_for_route(state, pause_reason), now)


def _fired_by(row: HeartbeatRow | None, run: RunRow) -> bool:
    """The run's own heartbeat, still live: not one set again (or cleared) since it fired."""
    return (
        row is not None
        and row.generation == run.generation
        and row.status != HeartbeatStatus.CLEARED
    )


def _record_delivery(
    db: Session, run: RunRow, fence: int, channel: str, delivered: DeliveryOutcome, now: datetime
) -> None:
    if run.state == RunState.DELIVERING:
        record_outcome_in(db, fence, delivered, now)
    else:  # never marked: nothing was to be sent
        owner = Owner(run.session_id, fence, channel, run_id=run.id)
        insert_suppressed_in(db, owner, Outbound(delivered.key, "heartbeat"), now)


def index_due(session: SessionRow, row: HeartbeatRow | None) -> datetime | None:
    """The due time the index should hold for the session (None: no entry)."""
    if row is None or session.status != SessionStatus.ACTIVE:
        return None
    return heartbeat_state(row).next_due()


def _refusal(
    session: SessionRow,
    row: HeartbeatRow | None,
    run: RunRow,
    conversation: int,
    owner_changed: bool,
) -> RefundReason | None:
    if session.status == SessionStatus.SUSPENDED:
        return RefundReason.SESSION_SUSPENDED
    if session.status != SessionStatus.ACTIVE:
        return _DEPARTED.get(session.closed_reason or "", RefundReason.SESSION_CLOSED)
    if session.conversation != conversation:
        return RefundReason.SESSION_RESET
    if row is None or row.generation != run.generation or row.status != HeartbeatStatus.ACTIVE:
        return RefundReason.HEARTBEAT_CHANGED
    return RefundReason.OWNER_CHANGED if owner_changed else None


def _add_message(
    db: Session, session: SessionRow, run: RunRow, role: str, kind: str, text: str, now: datetime
) -> MessageView:
    row = MessageRow(
        session_id=session.id,
        conversation=session.conversation,
        role=role,
        kind=kind,
        text=text,
        fire_id=run.fire_id,
        state=MessageState.DONE,
        created_at=now,
    )
    db.add(row)
    db.flush()
    return message_view(row)


def _prompt_of(db: Session, run: RunRow) -> MessageView:
    row = db.scalars(
        select(MessageRow)
        .where(MessageRow.fire_id == run.fire_id, MessageRow.role == "user")
        .order_by(MessageRow.id)
    ).first()
    assert row is not None  # stored in the transaction that started the run
    return message_view(row)


def _before(db: Session, message: MessageView, limit: int) -> list[MessageView]:
    rows = db.scalars(
        select(MessageRow)
        .where(MessageRow.session_id == message.session_id, MessageRow.id < message.id)
        .order_by(MessageRow.id.desc())
        .limit(limit)
    )
    return [message_view(r) for r in reversed(list(rows))]


def _admission_in(db: Session, session_id: str, fire_id: str) -> FireAdmission | None:
    try:
        session = resolve_active_row(db, session_id)
    except NotFound:
        return None
    existing = run_by_fire_id(db, fire_id)
    run = run_view(existing) if existing else None
    row = heartbeat_row(db, session.id)
    state = heartbeat_state(row) if row else None
    return FireAdmission(session_view(session), run, state, index_due(session, row))
