"""The fire path's SQL, one transaction per step of a heartbeat turn.

A fire costs three transactions (two when the agent stays silent), each returning everything
the next step needs, so no step reads again what the one before read:

1. ``admit_fires`` (admission, one transaction for a task's whole batch): for each fire the
   active session of the conversation, whether the ledger has the fire, the heartbeat and the
   due time the index should hold;
2. ``begin_fire`` (the lock was granted, the emergency stop and the owner read with it):
   claim the grant's fence, reserve the fire, re-check it (the session's conversation, then
   what Redis read) and either give the reservation back at once or start it, with the prompt
   message stored and the conversation the agent sees read;
3. ``mark_delivering`` (``ledger.py``, with the delivery record ``pending``), then
   ``finish_fire``: the outcome, the stored reply, the delivery's outcome and the next due time
   for the index.

Every write is fenced as in ``ledger.py`` (``begin_fire`` claims the fence itself). The steps
run ``ledger_sql.py``'s named Core statements (``fire_rows.py``): no ORM object is loaded or
flushed on a fire that goes as planned; settling older turns keeps the ORM steps of
``ledger_steps.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from hbgw.core.errors import StaleFence
from hbgw.core.usage import TokenUsage
from hbgw.sessions import heartbeat as hb
from hbgw.sessions.states import (
    ClosedReason,
    HeartbeatStatus,
    RefundReason,
    RunState,
    SessionStatus,
    fire_day,
)
from hbgw.sessions.store import fire_rows as rows
from hbgw.sessions.store import ledger_sql as sql
from hbgw.sessions.store.base import Transactions, transaction
from hbgw.sessions.store.deliveries import DeliveryOutcome
from hbgw.sessions.store.heartbeat_costs import tokens_on_day_in
from hbgw.sessions.store.heartbeat_records import heartbeat_state
from hbgw.sessions.store.ledger_steps import finished_outcome
from hbgw.sessions.store.message_records import MessageView
from hbgw.sessions.store.reservations import reserved_values
from hbgw.sessions.store.run_views import (
    Duplicate,
    Refused,
    RunKey,
    RunView,
    run_view,
)
from hbgw.sessions.store.session_records import SessionView, resolve_active_row, session_view


@dataclass(frozen=True)
class FireAdmission:
    """What admission decides from: ``next_due`` is what the due index should hold for
    ``session`` (None: no entry), as ``DueSettle.settle`` would compute it."""

    session: SessionView
    existing: RunView | None  # the ledger's run of this fire id: a duplicate delivery
    state: hb.HeartbeatState | None
    next_due: datetime | None


@dataclass(frozen=True)
class FireStart:
    """What a heartbeat turn brings to its begin: ``conversation``, the session's when the fire
    was admitted (another one: the session was reset since); ``refusal``, what the Redis
    re-check read with the lock found (lock lost, emergency stop, owner changed), weighed after
    SQL's own reasons; ``prompt``, the turn's message written from the heartbeat state the
    reservation reads; ``history``, how many messages before it the agent sees."""

    conversation: int
    prompt: Callable[[hb.HeartbeatState], str]
    history: int
    refusal: RefundReason | None = None
    worker: str | None = None
    deferred: bool = False


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
    """The re-check refused the fire: its run is ``refunded`` with ``reason`` in the transaction
    that reserved it (nothing counted, the anchor unchanged); ``state`` is the heartbeat."""

    reason: RefundReason
    run: RunView
    state: hb.HeartbeatState | None


@dataclass(frozen=True)
class FireBegin:
    """The fence is claimed; ``outcome``: the run started (``Started``), reserved and given back
    in the same transaction because the re-check refused it (``NotStarted``), the fire already
    in the ledger (``Duplicate``) or nothing reserved (``Refused``). ``next_due``: the due time
    the index should hold after it; ``unknown``: deliveries of older turns the claim found cut
    off."""

    outcome: Started | NotStarted | Duplicate | Refused
    next_due: datetime | None
    unknown: int = 0


@dataclass(frozen=True)
class Finished:
    run: RunView
    next_due: datetime | None


class FireTurns(Transactions):
    @transaction
    def admit_fires(self, fires: Sequence[tuple[str, str]]) -> list[FireAdmission | None]:
        """For each (session id, fire id): follow compression, look the fire up in the ledger,
        read the heartbeat; None for a session that does not exist. One read-only transaction
        and three statements for the batch: a task carries up to a worker's share of a tick."""
        if not fires:
            return []
        with self._transaction() as db:
            return _admissions_in(db, fires)

    @transaction(repeatable=True)
    def begin_fire(
        self,
        session_id: str,
        fence: int,
        fire_id: str,
        due_ms: int,
        now: datetime,
        start: FireStart,
    ) -> FireBegin:
        """The lock was granted: claim its fence (as ``claim_fence``), reserve the fire, re-check
        it and start it, in one transaction. StaleFence (a fence not newer than the session's)
        does nothing, unless this is a repeat after its own COMMIT was cut off: then it answers
        what that COMMIT stored."""
        try:
            return self._begin_fire(session_id, fence, fire_id, due_ms, now, start)
        except IntegrityError:
            # A concurrent reserve of the same fire id won the UNIQUE race and rolled our
            # claim back with it: again, the fire is a duplicate now.
            return self._begin_fire(session_id, fence, fire_id, due_ms, now, start)

    def _begin_fire(
        self,
        session_id: str,
        fence: int,
        fire_id: str,
        due_ms: int,
        now: datetime,
        start: FireStart,
    ) -> FireBegin:
        with self._transaction() as db:
            try:
                session, unknown = rows.claim(db, session_id, fence, now)
            except StaleFence:
                again = _begun_before(db, session_id, fence, fire_id, start.history)
                if again is None:
                    raise
                return again
            conn = rows.on(db, writes=True)
            row = rows.heartbeat_of(conn, session_id)
            admitted = rows.reserving(conn, session, fire_id, row, now)
            if not isinstance(admitted, hb.HeartbeatState):  # a duplicate, or refused
                state = heartbeat_state(row) if row else None
                return FireBegin(admitted, rows.index_due(session.status, state), unknown)
            assert row is not None  # admit refused otherwise
            values = reserved_values(
                fire_id, session.id, admitted, fence=fence, due_ms=due_ms, now=now,
                worker=start.worker, deferred=start.deferred, heartbeat_id=row.id,
            )  # fmt: skip
            reason = _refusal(session, start)
            if reason is not None:
                refused = _refunded_at_once(conn, values, row.id, reason, now)
                due = rows.index_due(session.status, admitted)
                return FireBegin(NotStarted(reason, refused, admitted), due, unknown)
            started = _start(db, session, values, row.id, admitted, start, now)
            return FireBegin(started, rows.index_due(session.status, started.state), unknown)

    @transaction(repeatable=True)
    def finish_fire(
        self,
        run_key: RunKey,
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
        ending = _Ending(quiet, delivered_hash, end_heartbeat, pause_reason)
        with self._transaction() as db:
            conn = rows.on(db, writes=True)
            run = rows.run_with_fence(conn, run_key, fence)
            if run.state == final:  # a repeat after a COMMIT whose answer was lost (reply too)
                return Finished(rows.run_view_of(run), _session_due(conn, run))
            assert run.job_id is None  # a cron job's run finishes in job_turns.py
            if delivered is not None:
                rows.record_delivery(db, run, fence, channel, delivered, now)
            view = rows.finish(conn, run, final, now, detail, usage)
            state = _settle_heartbeat(conn, run, final, ending, now)
            rows.add_message(
                db, run.session_id, run.session_conversation, run.fire_id, "assistant",
                reply_kind, reply, now,
            )  # fmt: skip
            if state is None:  # the heartbeat moved on to another session (compression)
                return Finished(view, _session_due(conn, run))
            return Finished(view, rows.index_due(run.session_status, state))


@dataclass(frozen=True)
class _Ending:
    """What the finish does to the heartbeat that fired, besides its outcome."""

    quiet: bool
    delivered_hash: str | None
    end_heartbeat: bool
    pause_reason: str | None


def _settle_heartbeat(
    conn: Connection, run: Row[Any], final: RunState, ending: _Ending, now: datetime
) -> hb.HeartbeatState | None:
    """The run's heartbeat after its finish, in one UPDATE when it is still the generation that
    fired (every pause, resume, clear or new setting bumps it, so that generation is the active
    one the run reserved from): its outcome, backoff and dedupe, then its end or its pause. The
    state (for the index) when the heartbeat is still the session's, else None."""
    row = conn.execute(sql.HEARTBEAT_BY_ID, {"p_heartbeat_id": run.heartbeat_id}).first()
    assert row is not None  # a foreign key, and heartbeat rows are never deleted
    state = heartbeat_state(row)
    if row.generation == run.generation:
        quiet, digest = ending.quiet, ending.delivered_hash
        state = hb.after_reply(state, quiet=quiet, delivered_hash=digest, now=now)
        if ending.end_heartbeat:
            state = hb.clear(state, now)
        elif ending.pause_reason and state.status == HeartbeatStatus.ACTIVE:
            state = hb.pause_for_route(state, ending.pause_reason)
        rows.write_state(conn, row.id, state, now, last_outcome=final.value)
    return state if row.session_id == run.session_id else None


def _session_due(conn: Connection, run: Row[Any]) -> datetime | None:
    row = rows.heartbeat_of(conn, run.session_id)
    return rows.index_due(run.session_status, heartbeat_state(row) if row else None)


def _refusal(session: Row[Any], start: FireStart) -> RefundReason | None:
    """The re-check, after ``admit`` found the session active and its heartbeat due: the session
    reset since admission, then what Redis read with the lock."""
    if session.conversation != start.conversation:
        return RefundReason.SESSION_RESET
    return start.refusal


def _refunded_at_once(
    conn: Connection, values: dict[str, Any], heartbeat_id: int, reason: RefundReason, now: datetime
) -> RunView:
    """A reservation the re-check refused, given back in the transaction that made it: the run
    is written ``refunded`` with the reason, the heartbeat keeps its count and anchor (only its
    last outcome says so), and the fire id is taken (``settle_duplicate``)."""
    refunded = rows.insert_run(
        conn, values, state=RunState.REFUNDED, finished_at=now, detail=reason.value
    )
    outcome = {"last_outcome": f"refunded: {reason}"[:255], "updated_at": now}
    conn.execute(sql.UPDATE_HEARTBEAT, {"p_heartbeat_id": heartbeat_id, **outcome})
    return refunded


def _start(
    db: Session,
    session: Row[Any],
    values: dict[str, Any],
    heartbeat_id: int,
    admitted: hb.HeartbeatState,
    start: FireStart,
    now: datetime,
) -> Started:
    """The reservation, written started (count +1, anchor = now), and its prompt stored."""
    conn = rows.on(db, writes=True)
    run = rows.insert_run(conn, values, state=RunState.STARTED, started_at=now)
    state = hb.reserve(admitted, now)
    rows.write_state(conn, heartbeat_id, state, now)
    message = rows.add_message(
        db, session.id, session.conversation, run.fire_id, "user", "heartbeat",
        start.prompt(admitted), now,
    )  # fmt: skip
    before = rows.history_before(db, message, start.history)
    return Started(run, state, message, before, _spent(db, heartbeat_id, now, state))


def _begun_before(
    db: Session, session_id: str, fence: int, fire_id: str, history: int
) -> FireBegin | None:
    """A repeat of ``begin_fire`` after its own COMMIT was cut off (the fence is claimed and the
    fire's run carries it): what that COMMIT stored. None: another grant's, a stale fence."""
    conn = rows.on(db, writes=False)
    run = rows.own_run_after_cut(conn, session_id, fence, fire_id)  # or StaleFence
    if run is None:
        return None
    row = rows.heartbeat_of(conn, session_id)
    state = heartbeat_state(row) if row else None
    due = rows.index_due(run.session_status, state)
    view = rows.run_view_of(run)
    if run.state == RunState.REFUNDED:
        return FireBegin(NotStarted(RefundReason(run.detail), view, state), due)
    if run.state != RunState.STARTED or state is None:
        return None
    message = rows.prompt_of(db, fire_id, run.started_at)
    before = rows.history_before(db, message, history)
    return FireBegin(
        Started(view, state, message, before, _spent(db, run.heartbeat_id, run.reserved_at, state)),
        due,
    )


def _spent(db: Session, heartbeat_id: int, reserved_at: datetime, state: hb.HeartbeatState) -> int:
    """Tokens of the run's heartbeat today (its own are not recorded yet: it has not finished);
    0 without a budget, which is all they are read for (no query on an uncapped fire)."""
    if not state.policy.budget:
        return 0
    return tokens_on_day_in(db, heartbeat_id, reserved_at)


def _admissions_in(db: Session, fires: Sequence[tuple[str, str]]) -> list[FireAdmission | None]:
    """The batch's sessions, runs and heartbeats, one statement each; a compressed session is
    followed to its active child one at a time (rare)."""
    conn = rows.on(db, writes=False)
    ids = sorted({sid for sid, _ in fires})
    found = rows.by_key(conn.execute(sql.SESSIONS_BY_ID, {"p_ids": ids}).all(), "id")
    active: dict[str, Any] = {}
    for sid, found_row in found.items():
        compressed = found_row.closed_reason == ClosedReason.COMPRESSED
        if found_row.status == SessionStatus.CLOSED and compressed:
            active[sid] = resolve_active_row(db, sid)
        else:
            active[sid] = found_row
    fire_ids = sorted({fid for _, fid in fires})
    days = sorted({fire_day(fid) for fid in fire_ids})
    fire_runs = conn.execute(sql.RUNS_BY_FIRE_ID, {"p_ids": fire_ids, "p_days": days}).all()
    runs = rows.by_key(fire_runs, "fire_id")
    resolved = sorted({s.id for s in active.values()})
    beats = conn.execute(sql.HEARTBEATS_OF_SESSIONS, {"p_ids": resolved}).all()
    heartbeats = rows.by_key(beats, "session_id")
    admissions: list[FireAdmission | None] = []
    for sid, fid in fires:
        session = active.get(sid)
        if session is None:
            admissions.append(None)
            continue
        row = heartbeats.get(session.id)
        state = heartbeat_state(row) if row else None
        existing = runs.get(fid)
        run = run_view(existing) if existing else None
        due = rows.index_due(session.status, state)
        admissions.append(FireAdmission(session_view(session), run, state, due))
    return admissions
