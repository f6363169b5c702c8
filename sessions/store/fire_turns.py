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

Every write is fenced as in ``ledger.py`` (``claim_fire`` claims the fence itself). The steps
run ``ledger_sql.py``'s named Core statements (``fire_rows.py``): no ORM object is loaded or
flushed on a fire that goes as planned; settling older turns and a refund keep the ORM steps
of ``ledger_steps.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from hbgw.core.errors import InvalidState
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
from hbgw.sessions.store.base import Transactions, heartbeat_row, repeatable, run_row
from hbgw.sessions.store.deliveries import DeliveryOutcome
from hbgw.sessions.store.heartbeat_costs import tokens_on_day_in
from hbgw.sessions.store.heartbeat_records import heartbeat_state
from hbgw.sessions.store.ledger_steps import finished_outcome, refund_in, refund_reason
from hbgw.sessions.store.message_records import MessageView
from hbgw.sessions.store.run_views import Reserved, ReserveOutcome, RunKey, RunView, run_view
from hbgw.sessions.store.session_records import SessionView, resolve_active_row, session_view


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
        and three statements for the batch: a task carries up to a worker's share of a tick."""
        if not fires:
            return []
        with self._transaction() as db:
            return _admissions_in(db, fires)

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
            session, unknown = rows.claim(db, session_id, fence, now)
            conn = rows.on(db, writes=True)
            row = rows.heartbeat_of(conn, session_id)
            outcome = rows.reserve(
                conn, session, fire_id, due_ms, fence, now, worker, deferred, row
            )
            # The state the reservation wrote (its read again would be one more statement).
            state = _reserved_state(outcome, row, now)
            return FireClaim(outcome, state, rows.index_due(session.status, state), unknown)

    @repeatable
    def start_fire(
        self,
        run_key: RunKey,
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
            conn = rows.on(db, writes=True)
            run = rows.run_with_fence(conn, run_key, fence)
            row = rows.heartbeat_of(conn, run.session_id)
            state = heartbeat_state(row) if row else None
            if run.state == RunState.STARTED and run.fence == fence:
                assert state is not None  # it started: the re-check found the heartbeat
                message = rows.prompt_of(db, run.fire_id, run.started_at)  # a lost COMMIT's repeat
                before = rows.history_before(db, message, history)
                return Started(
                    rows.run_view_of(run), state, message, before, _spent(db, run, state)
                )
            reason = rows.refusal(run, row, conversation, owner_changed)
            if reason is not None:
                if run.state != RunState.RESERVED and run.detail == reason.value:
                    return NotStarted(reason, rows.run_view_of(run), state)  # a repeat, as above
                refunded = run_row(db, run_key)  # the rare way: the ORM's refund steps
                refund_in(db, refunded, reason, now)
                return NotStarted(reason, run_view(refunded), state)
            assert state is not None  # refusal answered HEARTBEAT_CHANGED otherwise
            if run.state != RunState.RESERVED:
                raise InvalidState(f"Run {run.fire_id} is {run.state}; only a reserved run starts.")
            started = rows.start(conn, run, now)
            message = rows.add_message(
                db, run.session_id, run.session_conversation, run.fire_id, "user", "heartbeat",
                prompt, now,
            )  # fmt: skip
            before = rows.history_before(db, message, history)
            return Started(started, state, message, before, _spent(db, run, state))

    def refund_fire(self, run_key: RunKey, reason: RefundReason, now: datetime) -> NotStarted:
        """Give back a reservation that never reached the agent, answering the session's heartbeat
        after it (for the index) as well.

        Only when nothing newer happened: same generation and the anchor still the one this
        reservation set. Otherwise the run is ``abandoned`` and the newer state wins.
        """
        why = refund_reason(reason)
        with self._transaction() as db:
            run = run_row(db, run_key)
            refund_in(db, run, why, now)
            row = heartbeat_row(db, run.session_id)
            return NotStarted(why, run_view(run), heartbeat_state(row) if row else None)

    @repeatable
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
            if state is None:  # no heartbeat of the run's, or one that moved on (compression)
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
    fired: its outcome, and unless cleared meanwhile, backoff and dedupe, then its end or its
    pause. The state (for the index) when the heartbeat is still the session's, else None."""
    row = conn.execute(sql.HEARTBEAT_BY_ID, {"p_heartbeat_id": run.heartbeat_id}).first()
    if row is None:
        return None
    state = heartbeat_state(row)
    if row.generation == run.generation and row.status == HeartbeatStatus.CLEARED:
        outcome = {"last_outcome": final.value, "updated_at": now}
        conn.execute(sql.UPDATE_HEARTBEAT, {"p_heartbeat_id": row.id, **outcome})
    elif row.generation == run.generation:
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


def _reserved_state(
    outcome: ReserveOutcome, row: Row[Any] | None, now: datetime
) -> hb.HeartbeatState | None:
    """The heartbeat's state after the claim's reservation (``hb.reserve`` when it reserved)."""
    if row is None:
        return None
    state = heartbeat_state(row)
    return hb.reserve(state, now) if isinstance(outcome, Reserved) else state


def _spent(db: Session, run: Row[Any], state: hb.HeartbeatState) -> int:
    """Tokens of the run's heartbeat today (its own are not recorded yet: it has not finished);
    0 without a budget, which is all they are read for (no query on an uncapped fire)."""
    if run.heartbeat_id is None or not state.policy.budget:
        return 0
    return tokens_on_day_in(db, run.heartbeat_id, run.reserved_at)


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
