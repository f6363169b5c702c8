"""The fire ledger: one row per accepted fire id, reserved → started [→ delivering] → finished,
or given back.

A reservation counts the fire and moves the anchor in the same transaction; a refund puts both
back only while nothing newer happened. Writes of a running turn carry its fence, and nothing
leaves for a platform before a fenced write says so (``mark_delivering``, ``check_reply``). A
grant's ``claim_fence`` settles what older turns left behind: a reservation is given back, a run
cut off in its turn ends ``failed`` with a ``LostLockDetail``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from core.clock import from_ms
from core.errors import InvalidState, StaleFence
from core.usage import TokenUsage
from sessions import heartbeat as hb
from sessions.models import MODEL_CHARS, HeartbeatRow, MessageRow, RunRow, SessionRow
from sessions.states import (
    FINISHED,
    IN_TURN,
    HeartbeatStatus,
    LostLockDetail,
    MessageState,
    RefundReason,
    RunState,
    SessionStatus,
)
from sessions.store.base import (
    Transactions,
    fenced_session_row,
    heartbeat_row,
    repeatable,
    run_row,
    session_row,
)
from sessions.store.heartbeat_records import apply_state, heartbeat_state
from sessions.store.ledger_audit import HeartbeatSnapshot, LedgerSnapshot, read_snapshot
from sessions.store.run_views import (
    Duplicate,
    RefusalReason,
    Refused,
    Reserved,
    ReserveOutcome,
    RunView,
    run_view,
)

__all__ = [
    "Duplicate",
    "FireLedger",
    "HeartbeatSnapshot",
    "LedgerSnapshot",
    "RefusalReason",
    "Refused",
    "ReserveOutcome",
    "Reserved",
    "RunView",
    "run_view",
]


class FireLedger(Transactions):
    def reserve_fire(
        self,
        session_id: str,
        fire_id: str,
        due_ms: int,
        fence: int,
        now: datetime,
        *,
        worker: str | None = None,
        deferred: bool = False,
    ) -> ReserveOutcome:
        """Reserve one fire: count +1, anchor = now, one ledger row, all or nothing."""
        try:
            with self._transaction() as db:
                session = session_row(db, session_id, for_update=True)
                existing = _run_by_fire_id(db, fire_id)
                if existing is not None:
                    return Duplicate(run_view(existing))
                if fence != session.fence:
                    # Claimed at the lock grant (claim_fence); any other fence is another turn's.
                    return Refused(RefusalReason.STALE_FENCE)
                row = heartbeat_row(db, session_id)
                admitted = _admit(session, row, now)
                if isinstance(admitted, Refused):
                    return admitted
                assert row is not None  # _admit refused otherwise
                session.updated_at = now
                run = RunRow(
                    fire_id=fire_id,
                    heartbeat_id=row.id,
                    session_id=session_id,
                    generation=admitted.generation,
                    fence=fence,
                    state=RunState.RESERVED,
                    due_at=from_ms(due_ms),
                    reserved_at=now,
                    prev_anchor_at=admitted.anchor,
                    prev_last_fired_at=admitted.last_fired,
                    worker=worker,
                    deferred=deferred,
                    missed=admitted.missed(now),
                )
                db.add(run)
                apply_state(row, hb.reserve(admitted, now), now)
                db.flush()
                return Reserved(run_view(run))
        except IntegrityError:
            # A concurrent reserve of the same fire id won the UNIQUE race.
            return self._concurrent_winner(fire_id)

    def _concurrent_winner(self, fire_id: str) -> Duplicate:
        with self._transaction() as db:
            winner = _run_by_fire_id(db, fire_id)
            assert winner is not None  # the UNIQUE violation means it is committed
            return Duplicate(run_view(winner))

    @repeatable
    def mark_started(self, run_id: int, fence: int, now: datetime) -> RunView:
        with self._transaction() as db:
            run = run_row(db, run_id)
            fenced_session_row(db, run.session_id, fence)
            if run.state == RunState.STARTED and run.fence == fence:
                return run_view(run)  # a repeat after a COMMIT whose answer was lost
            if run.state != RunState.RESERVED:
                raise InvalidState(f"Run {run.fire_id} is {run.state}; only a reserved run starts.")
            run.state = RunState.STARTED
            run.started_at = now
            return run_view(run)

    @repeatable
    def mark_delivering(self, run_id: int, fence: int, now: datetime) -> RunView:
        """The fenced step just before a reply leaves: a turn that lost its lock sends nothing.

        Raises ``StaleFence`` when a newer grant holds the session (which settled this run).
        """
        with self._transaction() as db:
            run = run_row(db, run_id)
            fenced_session_row(db, run.session_id, fence)
            if run.state == RunState.DELIVERING and run.fence == fence:
                return run_view(run)  # a repeat after a COMMIT whose answer was lost
            if run.state != RunState.STARTED:
                raise InvalidState(
                    f"Run {run.fire_id} is {run.state}; only a started run delivers."
                )
            run.state = RunState.DELIVERING
            return run_view(run)

    @repeatable
    def settle_lost(self, run_id: int, fence: int, now: datetime) -> RunView | None:
        """A turn noticed it lost its lock: end its run ``failed`` while no newer grant did.

        Fenced: ``StaleFence`` means a newer grant exists, and its claim settled the run already.
        None when the run is no longer in its turn.
        """
        with self._transaction() as db:
            run = run_row(db, run_id)
            fenced_session_row(db, run.session_id, fence)
            if run.state not in IN_TURN:
                return None
            _settle_lost_run(db, run, now)
            return run_view(run)

    def check_reply(self, session_id: str, message_id: int, fence: int) -> bool:
        """Before a reply to a user message leaves: raise StaleFence unless ``fence`` is the
        session's newest; False when the message was answered already (nothing to send)."""
        with self._transaction() as db:
            fenced_session_row(db, session_id, fence)
            message = db.get(MessageRow, message_id)
            return message is not None and message.state == MessageState.QUEUED

    def refund(self, run_id: int, reason: RefundReason, now: datetime) -> RunView:
        """Give back a reservation that never reached the agent.

        Only when nothing newer happened: same generation and the anchor still the one this
        reservation set. Otherwise the run is ``abandoned`` and the newer state wins.
        """
        why = _refund_reason(reason)
        with self._transaction() as db:
            run = run_row(db, run_id)
            if run.state != RunState.RESERVED:
                raise InvalidState(
                    f"Run {run.fire_id} is {run.state}; only a run that never started is refunded."
                )
            _refund_run(db, run, why, now)
            return run_view(run)

    def refund_orphan(self, run_id: int, now: datetime) -> RunView | None:
        """Refund a reservation whose worker died before the agent started; None if it moved on."""
        with self._transaction() as db:
            run = run_row(db, run_id)
            if run.state != RunState.RESERVED:
                return None
            _refund_run(db, run, RefundReason.ORPHANED, now)
            return run_view(run)

    def stale_reservations(self, before: datetime, limit: int | None = None) -> list[RunView]:
        """Runs still ``reserved`` since before ``before``, oldest first: candidates for
        ``refund_orphan``; at most ``limit`` (the rest on a later pass)."""
        with self._transaction() as db:
            rows = db.scalars(
                select(RunRow)
                .where(RunRow.state == RunState.RESERVED, RunRow.reserved_at < before)
                .order_by(RunRow.reserved_at, RunRow.id)
                .limit(limit)
            )
            return [run_view(r) for r in rows]

    @repeatable
    def finish(
        self,
        run_id: int,
        outcome: RunState,
        fence: int,
        now: datetime,
        detail: str | None = None,
        usage: TokenUsage | None = None,
    ) -> RunView:
        """Record how a started run ended: ``outcome`` is one of ``states.FINISHED``.

        ``usage``: the tokens the turn spent, failed turns included — written in the same
        fenced transaction, so a stale turn records nothing.
        """
        final = _finished_outcome(outcome)
        with self._transaction() as db:
            run = run_row(db, run_id)
            fenced_session_row(db, run.session_id, fence)
            if run.state == final:
                return run_view(run)  # a repeat after a COMMIT whose answer was lost
            if run.state not in IN_TURN:
                raise InvalidState(
                    f"Run {run.fire_id} is {run.state}; only a started run finishes."
                )
            run.state = final
            run.finished_at = now
            run.detail = detail
            if usage is not None:
                run.prompt_tokens = usage.prompt_tokens
                run.completion_tokens = usage.completion_tokens
                run.model = usage.model[:MODEL_CHARS]
            row = db.get(HeartbeatRow, run.heartbeat_id)
            if row is not None and row.generation == run.generation:
                row.last_outcome = final.value
                row.updated_at = now
            return run_view(run)

    def claim_fence(self, session_id: str, fence: int, now: datetime) -> None:
        """A lock was granted: record its fence, so every write of older turns is rejected.

        Claimed once per grant, before anything runs under the lock; every later write of the
        turn (reservation included) must carry exactly this fence. What older turns left is
        settled here, in the same transaction: the lock moved on, so they are over.
        """
        with self._transaction() as db:
            session = session_row(db, session_id, for_update=True)
            if fence <= session.fence:
                raise StaleFence(
                    f"Fence {fence} of session {session_id} is not newer than {session.fence}."
                )
            _give_back_orphans(db, session_id, fence, now)
            _settle_cut_off_turns(db, session_id, fence, now)
            session.fence = fence
            session.updated_at = now

    def check_fence(self, session_id: str, fence: int) -> None:
        """Raise StaleFence unless ``fence`` is still the session's newest (before a delivery)."""
        with self._transaction() as db:
            fenced_session_row(db, session_id, fence)

    def runs(self, session_id: str | None = None) -> list[RunView]:
        with self._transaction() as db:
            query = select(RunRow).order_by(RunRow.id)
            if session_id is not None:
                query = query.where(RunRow.session_id == session_id)
            return [run_view(r) for r in db.scalars(query)]

    def audit_snapshot(self) -> LedgerSnapshot:
        """Everything the invariant check compares, read from one snapshot of the database."""
        with self._transaction() as db:
            return read_snapshot(db)

    def get_run(self, fire_id: str) -> RunView | None:
        with self._transaction() as db:
            run = _run_by_fire_id(db, fire_id)
            return run_view(run) if run else None

    def max_fence(self, session_id: str) -> int:
        """The highest fence SQL knows for the session: what Redis reseeds from."""
        with self._transaction() as db:
            session = session_row(db, session_id)
            ledger = db.scalar(
                select(func.max(RunRow.fence)).where(RunRow.session_id == session_id)
            )
            return max(session.fence, ledger or 0)


def _run_by_fire_id(db: Session, fire_id: str) -> RunRow | None:
    return db.scalars(select(RunRow).where(RunRow.fire_id == fire_id)).first()


def _admit(
    session: SessionRow, row: HeartbeatRow | None, now: datetime
) -> hb.HeartbeatState | Refused:
    """The heartbeat state a fire may reserve from now, or why it may not."""
    if row is None or row.status == HeartbeatStatus.CLEARED:
        return Refused(RefusalReason.NO_HEARTBEAT)
    state = heartbeat_state(row)
    if state.status != HeartbeatStatus.ACTIVE or session.status != SessionStatus.ACTIVE:
        return Refused(RefusalReason.INACTIVE)
    if not state.is_due(now):
        return Refused(RefusalReason.NOT_DUE, state.next_due())
    return state


def _give_back_orphans(db: Session, session_id: str, fence: int, now: datetime) -> None:
    """A newer fence proves older turns lost their lock: a reservation they left behind never
    reached the agent and is given back before the new one is made."""
    for orphan in db.scalars(
        select(RunRow).where(
            RunRow.session_id == session_id,
            RunRow.state == RunState.RESERVED,
            RunRow.fence < fence,
        )
    ):
        _refund_run(db, orphan, RefundReason.ORPHANED, now)
    db.flush()


def _settle_cut_off_turns(db: Session, session_id: str, fence: int, now: datetime) -> None:
    """Runs of older fences still in their turn were cut off (paused or dead worker): a stale
    turn can no longer write, so the new grant records how they ended, and when."""
    for run in db.scalars(
        select(RunRow).where(
            RunRow.session_id == session_id,
            RunRow.state.in_(list(IN_TURN)),
            RunRow.fence < fence,
        )
    ):
        _settle_lost_run(db, run, now)
    db.flush()


def _settle_lost_run(db: Session, run: RunRow, now: datetime) -> None:
    delivering = run.state == RunState.DELIVERING
    run.state = RunState.FAILED
    run.finished_at = now
    run.detail = (
        LostLockDetail.DURING_DELIVERY if delivering else LostLockDetail.BEFORE_DELIVERY
    ).value
    row = db.get(HeartbeatRow, run.heartbeat_id)
    if row is not None and row.generation == run.generation:
        row.last_outcome = RunState.FAILED.value
        row.updated_at = now


def _refund_run(db: Session, run: RunRow, reason: RefundReason, now: datetime) -> None:
    row = db.get(HeartbeatRow, run.heartbeat_id)
    unchanged = (
        row is not None and row.generation == run.generation and row.anchor_at == run.reserved_at
    )
    if row is not None and unchanged:
        state = hb.refund(
            heartbeat_state(row),
            prev_anchor=run.prev_anchor_at,
            prev_last_fired=run.prev_last_fired_at,
        )
        apply_state(row, state, now)
        row.last_outcome = f"refunded: {reason}"[:255]
        run.state = RunState.REFUNDED
    else:
        run.state = RunState.ABANDONED
    run.finished_at = now
    run.detail = reason.value


def _refund_reason(reason: RefundReason | str) -> RefundReason:
    try:
        return RefundReason(reason)
    except ValueError:
        known = ", ".join(repr(r.value) for r in RefundReason)
        raise ValueError(f"refund reason must be one of {known}, not {reason!r}") from None


def _finished_outcome(outcome: RunState | str) -> RunState:
    for state in FINISHED:
        if state == outcome:
            return state
    known = ", ".join(sorted(FINISHED))
    raise ValueError(f"outcome must be one of {known}, not {outcome!r}")
