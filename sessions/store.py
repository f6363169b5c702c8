"""The typed store: every SQL statement of the project lives in ``sessions/``.

Each public method is one transaction. Writes made by a running turn carry its fence: a write
whose fence is not the session's newest is rejected, so a worker that lost its lock cannot
change anything after the new owner has started.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from core.clock import from_ms
from core.errors import InvalidState, NotFound, StaleFence
from sessions import heartbeat as hb
from sessions.db import ensure_schema, make_engine
from sessions.grammar import Schedule
from sessions.models import ChatSession, Heartbeat, HeartbeatRun, Message
from sessions.rows import apply_state, heartbeat_state, message_view, run_view, session_view
from sessions.views import (
    Duplicate,
    HeartbeatAudit,
    HeartbeatStatus,
    MessageView,
    Refused,
    Reserved,
    ReserveOutcome,
    RestoreEntry,
    RunView,
    SessionView,
)

FINISHED_OUTCOMES = ("completed", "failed", "silent")
ORPHANED = "worker lost before the agent started"


def new_session_id() -> str:
    return "s" + uuid.uuid4().hex[:15]


class Store:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def from_url(cls, url: str) -> Store:
        """Open a store; the embedded SQLite store migrates itself, others must be migrated."""
        engine = make_engine(url)
        ensure_schema(engine)
        return cls(engine)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        with self._sessions() as db, db.begin():
            yield db

    # -- sessions --------------------------------------------------------------------------

    def create_session(
        self,
        *,
        platform: str,
        chat: str,
        now: datetime,
        thread: str | None = None,
        owner: str | None = None,
    ) -> SessionView:
        with self._tx() as db:
            row = _new_session(db, platform, chat, thread, owner, now, parent_id=None)
            return session_view(row)

    def get_session(self, session_id: str) -> SessionView:
        with self._tx() as db:
            return session_view(_session(db, session_id))

    def list_sessions(self, status: str | None = None) -> list[SessionView]:
        with self._tx() as db:
            query = select(ChatSession).order_by(ChatSession.created_at, ChatSession.id)
            if status:
                query = query.where(ChatSession.status == status)
            return [session_view(r) for r in db.scalars(query)]

    def resolve_active(self, session_id: str) -> SessionView:
        """Follow compression to the session that now continues this conversation."""
        with self._tx() as db:
            row = _session(db, session_id)
            for _ in range(1000):
                if not (row.status == "closed" and row.closed_reason == "compressed"):
                    break
                child = db.scalars(
                    select(ChatSession).where(ChatSession.parent_id == row.id)
                ).first()
                if child is None:
                    break
                row = child
            return session_view(row)

    # -- messages --------------------------------------------------------------------------

    def add_message(
        self,
        session_id: str,
        *,
        role: str,
        kind: str,
        text: str,
        now: datetime,
        fire_id: str | None = None,
        reply_to: int | None = None,
        state: str = "done",
        fence: int | None = None,
    ) -> MessageView:
        """Store a message; a turn passes its fence so a turn that lost its lock cannot."""
        with self._tx() as db:
            session = _session(db, session_id, for_update=fence is not None)
            if fence is not None and session.fence != fence:
                raise StaleFence(
                    f"Session {session_id} is now fenced at {session.fence}; a write with fence "
                    f"{fence} comes from a turn that lost its lock and is rejected."
                )
            row = Message(
                session_id=session_id,
                conversation=session.conversation,
                role=role,
                kind=kind,
                text=text,
                fire_id=fire_id,
                reply_to=reply_to,
                state=state,
                created_at=now,
            )
            db.add(row)
            db.flush()
            return message_view(row)

    def get_message(self, message_id: int) -> MessageView:
        with self._tx() as db:
            row = db.get(Message, message_id)
            if row is None:
                raise NotFound(f"There is no message {message_id}.")
            return message_view(row)

    def reply_for(self, message_id: int) -> MessageView | None:
        """The assistant reply or notice answering a user message, once there is one."""
        with self._tx() as db:
            row = db.scalars(
                select(Message).where(Message.reply_to == message_id).order_by(Message.id)
            ).first()
            return message_view(row) if row else None

    def mark_message_done(self, message_id: int, *, fence: int | None = None) -> None:
        with self._tx() as db:
            row = db.get(Message, message_id)
            if row is not None:
                if fence is not None:
                    _check_fence(db, row.session_id, fence)
                row.state = "done"

    def list_messages(self, session_id: str, *, limit: int = 100) -> list[MessageView]:
        with self._tx() as db:
            rows = db.scalars(
                select(Message)
                .where(Message.session_id == session_id)
                .order_by(Message.id.desc())
                .limit(limit)
            )
            return [message_view(r) for r in reversed(list(rows))]

    # -- heartbeat configuration -----------------------------------------------------------

    def get_heartbeat(self, session_id: str) -> hb.HeartbeatState | None:
        with self._tx() as db:
            _session(db, session_id)
            row = _heartbeat(db, session_id)
            return heartbeat_state(row) if row else None

    def heartbeat_status(self, session_id: str, now: datetime) -> HeartbeatStatus:
        return HeartbeatStatus(session_id, self.get_heartbeat(session_id), now)

    def set_heartbeat(
        self,
        session_id: str,
        *,
        schedule: Schedule,
        schedule_text: str,
        prompt: str,
        now: datetime,
        origin_chat: str | None = None,
        origin_thread: str | None = None,
    ) -> hb.HeartbeatState:
        """Set or replace the session's heartbeat; replies go where it was set."""
        with self._tx() as db:
            session = _active_session(db, session_id, "set a heartbeat in")
            row = _heartbeat(db, session_id)
            state = hb.set_heartbeat(
                heartbeat_state(row) if row else None,
                schedule=schedule,
                schedule_text=schedule_text,
                prompt=prompt,
                origin_chat=origin_chat if origin_chat is not None else session.chat,
                origin_thread=origin_thread if origin_chat is not None else session.thread,
                now=now,
            )
            if row is None:
                row = Heartbeat(session_id=session_id, created_at=now)
                db.add(row)
            apply_state(row, state, now)
            row.set_at = now
            row.last_outcome = None
            return state

    def pause_heartbeat(self, session_id: str, now: datetime) -> hb.HeartbeatState:
        return self._change(session_id, now, hb.pause)

    def resume_heartbeat(self, session_id: str, now: datetime) -> hb.HeartbeatState:
        return self._change(session_id, now, hb.resume)

    def clear_heartbeat(self, session_id: str, now: datetime) -> hb.HeartbeatState:
        return self._change(session_id, now, hb.clear)

    def _change(
        self,
        session_id: str,
        now: datetime,
        transition: hb.Transition,
    ) -> hb.HeartbeatState:
        with self._tx() as db:
            _session(db, session_id)
            row = _heartbeat(db, session_id)
            state = transition(heartbeat_state(row) if row else None, now)
            assert row is not None  # the transition raised InvalidState otherwise
            apply_state(row, state, now)
            return state

    # -- the fire ledger -------------------------------------------------------------------

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
            with self._tx() as db:
                session = _session(db, session_id, for_update=True)
                existing = db.scalars(
                    select(HeartbeatRun).where(HeartbeatRun.fire_id == fire_id)
                ).first()
                if existing is not None:
                    return Duplicate(run_view(existing))
                if fence <= session.fence:
                    return Refused("stale_fence")
                # A newer fence proves older turns lost their lock: a reservation they left
                # behind never reached the agent and is given back before this one is made.
                for orphan in db.scalars(
                    select(HeartbeatRun).where(
                        HeartbeatRun.session_id == session_id,
                        HeartbeatRun.state == "reserved",
                        HeartbeatRun.fence < fence,
                    )
                ):
                    _refund_run(db, orphan, ORPHANED, now)
                db.flush()
                row = _heartbeat(db, session_id)
                if row is None or row.status == "cleared":
                    return Refused("no_heartbeat")
                state = heartbeat_state(row)
                if state.status != "active" or session.status != "active":
                    return Refused("inactive")
                if not state.is_due(now):
                    return Refused("not_due", state.next_due())
                missed = state.missed(now)
                session.fence = fence
                session.updated_at = now
                run = HeartbeatRun(
                    fire_id=fire_id,
                    heartbeat_id=row.id,
                    session_id=session_id,
                    generation=state.generation,
                    fence=fence,
                    state="reserved",
                    due_at=from_ms(due_ms),
                    reserved_at=now,
                    prev_anchor_at=state.anchor,
                    prev_last_fired_at=state.last_fired,
                    worker=worker,
                    deferred=deferred,
                    missed=missed,
                )
                db.add(run)
                apply_state(row, hb.reserve(state, now), now)
                db.flush()
                return Reserved(run_view(run))
        except IntegrityError:
            # A concurrent reserve of the same fire id won the UNIQUE race.
            with self._tx() as db:
                run = db.scalars(select(HeartbeatRun).where(HeartbeatRun.fire_id == fire_id)).one()
                return Duplicate(run_view(run))

    def mark_started(self, run_id: int, fence: int, now: datetime) -> RunView:
        with self._tx() as db:
            run = _run(db, run_id)
            _check_fence(db, run.session_id, fence)
            if run.state != "reserved":
                raise InvalidState(f"Run {run.fire_id} is {run.state}; only a reserved run starts.")
            run.state = "started"
            run.started_at = now
            return run_view(run)

    def refund(self, run_id: int, reason: str, now: datetime) -> RunView:
        """Give back a reservation that never reached the agent.

        Only when nothing newer happened: same generation and the anchor still the one this
        reservation set. Otherwise the run is ``abandoned`` and the newer state wins.
        """
        with self._tx() as db:
            run = _run(db, run_id)
            if run.state != "reserved":
                raise InvalidState(
                    f"Run {run.fire_id} is {run.state}; only a run that never started is refunded."
                )
            _refund_run(db, run, reason, now)
            return run_view(run)

    def refund_orphan(self, run_id: int, now: datetime) -> RunView | None:
        """Refund a reservation whose worker died before the agent started; None if it moved on."""
        with self._tx() as db:
            run = _run(db, run_id)
            if run.state != "reserved":
                return None
            _refund_run(db, run, ORPHANED, now)
            return run_view(run)

    def stale_reservations(self, before: datetime) -> list[RunView]:
        """Runs still ``reserved`` since before ``before``: candidates for ``refund_orphan``."""
        with self._tx() as db:
            rows = db.scalars(
                select(HeartbeatRun)
                .where(HeartbeatRun.state == "reserved", HeartbeatRun.reserved_at < before)
                .order_by(HeartbeatRun.id)
            )
            return [run_view(r) for r in rows]

    def finish(
        self, run_id: int, outcome: str, fence: int, now: datetime, detail: str | None = None
    ) -> RunView:
        if outcome not in FINISHED_OUTCOMES:
            raise ValueError(f"outcome must be one of {FINISHED_OUTCOMES}, not {outcome!r}")
        with self._tx() as db:
            run = _run(db, run_id)
            _check_fence(db, run.session_id, fence)
            if run.state != "started":
                raise InvalidState(
                    f"Run {run.fire_id} is {run.state}; only a started run finishes."
                )
            run.state = outcome
            run.finished_at = now
            run.detail = detail
            row = db.get(Heartbeat, run.heartbeat_id)
            if row is not None and row.generation == run.generation:
                row.last_outcome = outcome
                row.updated_at = now
            return run_view(run)

    def claim_fence(self, session_id: str, fence: int, now: datetime) -> None:
        """A user turn starts: record its fence so older turns' writes are rejected."""
        with self._tx() as db:
            session = _session(db, session_id, for_update=True)
            if fence <= session.fence:
                raise StaleFence(
                    f"Fence {fence} of session {session_id} is not newer than {session.fence}."
                )
            session.fence = fence
            session.updated_at = now

    def check_fence(self, session_id: str, fence: int) -> None:
        with self._tx() as db:
            _check_fence(db, session_id, fence)

    def runs(self, session_id: str | None = None) -> list[RunView]:
        with self._tx() as db:
            query = select(HeartbeatRun).order_by(HeartbeatRun.id)
            if session_id is not None:
                query = query.where(HeartbeatRun.session_id == session_id)
            return [run_view(r) for r in db.scalars(query)]

    def get_run(self, fire_id: str) -> RunView | None:
        with self._tx() as db:
            run = db.scalars(select(HeartbeatRun).where(HeartbeatRun.fire_id == fire_id)).first()
            return run_view(run) if run else None

    def heartbeat_audit(self) -> list[HeartbeatAudit]:
        with self._tx() as db:
            rows = db.execute(
                select(Heartbeat, ChatSession.status)
                .join(ChatSession, ChatSession.id == Heartbeat.session_id)
                .order_by(Heartbeat.id)
            ).all()
            return [
                HeartbeatAudit(h.id, h.session_id, h.status, status, h.fire_count, h.set_at)
                for h, status in rows
            ]

    def max_fence(self, session_id: str) -> int:
        with self._tx() as db:
            session = _session(db, session_id)
            ledger = db.scalar(
                select(func.max(HeartbeatRun.fence)).where(HeartbeatRun.session_id == session_id)
            )
            return max(session.fence, ledger or 0)

    def list_restorable(self) -> list[RestoreEntry]:
        """Active heartbeats of active sessions, with their true next due time."""
        with self._tx() as db:
            rows = db.execute(
                select(Heartbeat, ChatSession.fence)
                .join(ChatSession, ChatSession.id == Heartbeat.session_id)
                .where(Heartbeat.status == "active", ChatSession.status == "active")
                .order_by(Heartbeat.id)
            ).all()
            out = []
            for row, fence in rows:
                due = heartbeat_state(row).next_due()
                if due is not None:
                    out.append(RestoreEntry(row.session_id, due, fence))
            return out

    # -- lifecycle -------------------------------------------------------------------------

    def compress(self, session_id: str, now: datetime) -> SessionView:
        """Continue the conversation under a new id; the heartbeat moves along intact."""
        with self._tx() as db:
            parent = _active_session(db, session_id, "compress")
            child = _new_session(
                db, parent.platform, parent.chat, parent.thread, parent.owner, now, parent.id
            )
            _close(parent, "compressed", now)
            row = _heartbeat(db, session_id)
            if row is not None:
                row.session_id = child.id
                row.updated_at = now
            return session_view(child)

    def reset(self, session_id: str, now: datetime) -> SessionView:
        """Start the conversation over: its heartbeat is cleared and never comes back."""
        with self._tx() as db:
            session = _active_session(db, session_id, "reset")
            session.conversation += 1
            session.updated_at = now
            _clear_departing(db, session_id, now)
            return session_view(session)

    def switch(self, session_id: str, now: datetime) -> SessionView:
        """The chat moves to a new conversation; the departing one keeps no heartbeat."""
        with self._tx() as db:
            old = _active_session(db, session_id, "switch away from")
            new = _new_session(db, old.platform, old.chat, old.thread, old.owner, now, None)
            _close(old, "switched", now)
            _clear_departing(db, session_id, now)
            return session_view(new)

    def suspend(self, session_id: str, now: datetime) -> SessionView:
        with self._tx() as db:
            session = _active_session(db, session_id, "suspend")
            session.status = "suspended"
            session.updated_at = now
            _clear_departing(db, session_id, now)
            return session_view(session)

    def resume_session(self, session_id: str, now: datetime) -> SessionView:
        """Open a suspended conversation again; its old heartbeat stays cleared."""
        with self._tx() as db:
            session = _session(db, session_id)
            if session.status != "suspended":
                raise InvalidState(f"Session {session_id} is {session.status}, not suspended.")
            session.status = "active"
            session.updated_at = now
            return session_view(session)


# -- row helpers (module-private) ------------------------------------------------------------


def _new_session(
    db: Session,
    platform: str,
    chat: str,
    thread: str | None,
    owner: str | None,
    now: datetime,
    parent_id: str | None,
) -> ChatSession:
    row = ChatSession(
        id=new_session_id(),
        platform=platform,
        chat=chat,
        thread=thread,
        owner=owner,
        status="active",
        parent_id=parent_id,
        conversation=1,
        fence=0,
        created_at=now,
        updated_at=now,
    )
    db.add(row)
    db.flush()
    return row


def _session(db: Session, session_id: str, *, for_update: bool = False) -> ChatSession:
    query = select(ChatSession).where(ChatSession.id == session_id)
    if for_update:
        query = query.with_for_update()
    row = db.scalars(query).first()
    if row is None:
        raise NotFound(
            f"There is no session {session_id!r} — `hbgw session create` makes one and "
            "prints its id."
        )
    return row


def _active_session(db: Session, session_id: str, verb: str) -> ChatSession:
    row = _session(db, session_id, for_update=True)
    if row.status != "active":
        reason = f" ({row.closed_reason})" if row.closed_reason else ""
        raise InvalidState(f"Cannot {verb} session {session_id}: it is {row.status}{reason}.")
    return row


def _close(row: ChatSession, reason: str, now: datetime) -> None:
    row.status = "closed"
    row.closed_reason = reason
    row.updated_at = now


def _clear_departing(db: Session, session_id: str, now: datetime) -> None:
    row = _heartbeat(db, session_id)
    if row is not None and row.status != "cleared":
        apply_state(row, hb.clear(heartbeat_state(row), now), now)


def _refund_run(db: Session, run: HeartbeatRun, reason: str, now: datetime) -> None:
    row = db.get(Heartbeat, run.heartbeat_id)
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
        run.state = "refunded"
    else:
        run.state = "abandoned"
    run.finished_at = now
    run.detail = reason


def _heartbeat(db: Session, session_id: str) -> Heartbeat | None:
    return db.scalars(select(Heartbeat).where(Heartbeat.session_id == session_id)).first()


def _run(db: Session, run_id: int) -> HeartbeatRun:
    run = db.get(HeartbeatRun, run_id, with_for_update=True)
    if run is None:
        raise NotFound(f"There is no run {run_id}.")
    return run


def _check_fence(db: Session, session_id: str, fence: int) -> None:
    session = _session(db, session_id, for_update=True)
    if session.fence != fence:
        raise StaleFence(
            f"Session {session_id} is now fenced at {session.fence}; a write with fence "
            f"{fence} comes from a turn that lost its lock and is rejected."
        )
