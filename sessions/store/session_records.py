"""Sessions and their lifecycle: create, look up, compress, reset, switch, suspend, resume."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, select, text
from sqlalchemy.orm import Session

from hbgw.core.clock import iso
from hbgw.core.errors import BadInput, InvalidState
from hbgw.core.webhook_url import webhook_url_problem
from hbgw.sessions.models import SessionRow
from hbgw.sessions.states import ClosedReason, SessionStatus
from hbgw.sessions.store.base import (
    Transactions,
    a_job_runs_own_session,
    active_session_row,
    heartbeat_row,
    session_row,
    transaction,
)
from hbgw.sessions.store.heartbeat_records import clear_departing
from hbgw.sessions.store.owner_quotas import check_session_room
from hbgw.sessions.validation import check_session_names

# A compression chain longer than this is a loop in the data, not a conversation.
MAX_COMPRESSIONS_FOLLOWED = 1000


@dataclass(frozen=True)
class SessionView:
    id: str
    platform: str
    chat: str
    thread: str | None
    owner: str | None
    status: SessionStatus
    closed_reason: ClosedReason | None
    parent_id: str | None
    conversation: int
    fence: int
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.id,
            "platform": self.platform,
            "chat": self.chat,
            "thread": self.thread,
            "owner": self.owner,
            "status": self.status,
            "closed_reason": self.closed_reason,
            "parent_id": self.parent_id,
            "conversation": self.conversation,
            "created_at": iso(self.created_at),
        }


def session_view(row: SessionRow | Row[Any]) -> SessionView:
    return SessionView(
        id=row.id,
        platform=row.platform,
        chat=row.chat,
        thread=row.thread,
        owner=row.owner,
        status=row.status,
        closed_reason=row.closed_reason,
        parent_id=row.parent_id,
        conversation=row.conversation,
        fence=row.fence,
        created_at=row.created_at,
    )


class SessionRecords(Transactions):
    @transaction
    def create_session(
        self,
        *,
        platform: str,
        chat: str,
        now: datetime,
        thread: str | None = None,
        owner: str | None = None,
        webhook_url: str | None = None,
    ) -> SessionView:
        """A new session; ``webhook_url``: a webhook session's own URL, kept with it in the
        same transaction (``BadInput`` when it is not postable: nothing is stored)."""
        check_session_names(platform=platform, chat=chat, thread=thread, owner=owner)
        if webhook_url is not None:
            problem = webhook_url_problem(webhook_url)
            if problem is not None:
                raise BadInput(problem)
        with self._transaction() as db:
            check_session_room(db, self.quotas, owner)
            row = _new_session(db, platform, chat, thread, owner, now, parent_id=None)
            row.webhook_url = webhook_url
            return session_view(row)

    @transaction
    def session_at(
        self,
        *,
        platform: str,
        chat: str,
        thread: str | None,
        now: datetime,
        owner: str | None = None,
        create: bool = True,
    ) -> SessionView | None:
        """The open (not closed) session of this chat and thread, the newest if several; a new
        one when there is none and ``create`` (else None). A platform's inbound messages find
        their conversation here. Two first messages of one thread at once make one session:
        SQLite's writers queue (BEGIN IMMEDIATE); on PostgreSQL a transaction-scoped advisory
        lock on the address serialises them. The fresh session of a routed cron job's run has
        the chat's address too, but it is the run's conversation, not the chat's: never found
        here, so a message in the chat does not land in a job's run."""
        check_session_names(platform=platform, chat=chat, thread=thread, owner=owner)
        with self._transaction() as db:
            if db.get_bind().dialect.name == "postgresql":
                address = f"{platform}\x1f{chat}\x1f{thread or ''}"
                db.execute(
                    text("SELECT pg_advisory_xact_lock(hashtextextended(:a, 0))"), {"a": address}
                )
            query = (
                select(SessionRow)
                .where(
                    SessionRow.platform == platform,
                    SessionRow.chat == chat,
                    SessionRow.thread.is_(None) if thread is None else SessionRow.thread == thread,
                    SessionRow.status != SessionStatus.CLOSED,
                    # Sessions of another owner at the same address are not this one's; the
                    # owner's index (owner, status) narrows the read until an address index.
                    SessionRow.owner.is_(None) if owner is None else SessionRow.owner == owner,
                    ~a_job_runs_own_session(),
                )
                .order_by(SessionRow.created_at.desc(), SessionRow.id.desc())
                .limit(1)
            )
            row = db.scalars(query).first()
            if row is None:
                if not create:
                    return None
                check_session_room(db, self.quotas, owner)
                row = _new_session(db, platform, chat, thread, owner, now, parent_id=None)
            return session_view(row)

    @transaction
    def get_session(self, session_id: str) -> SessionView:
        with self._transaction() as db:
            return session_view(session_row(db, session_id))

    @transaction
    def list_sessions(
        self, *, owner: str | None = None, after: str | None = None, limit: int = 100
    ) -> list[SessionView]:
        """Sessions in id order, after the id ``after``; only ``owner``'s when one is given."""
        with self._transaction() as db:
            query = select(SessionRow).order_by(SessionRow.id).limit(limit)
            if owner is not None:
                query = query.where(SessionRow.owner == owner)
            if after is not None:
                query = query.where(SessionRow.id > after)
            return [session_view(r) for r in db.scalars(query)]

    @transaction
    def resolve_active(self, session_id: str) -> SessionView:
        """Follow compression to the session that now continues this conversation."""
        with self._transaction() as db:
            return session_view(resolve_active_row(db, session_id))

    @transaction
    def compress(self, session_id: str, now: datetime) -> SessionView:
        """Continue the conversation under a new id; the heartbeat moves along intact."""
        with self._transaction() as db:
            parent = active_session_row(db, session_id, "compress")
            child = _new_session(
                db, parent.platform, parent.chat, parent.thread, parent.owner, now, parent.id
            )
            child.webhook_url = parent.webhook_url  # the conversation's route moves along
            _close(parent, ClosedReason.COMPRESSED, now)
            row = heartbeat_row(db, session_id)
            if row is not None:
                row.session_id = child.id
                row.updated_at = now
            return session_view(child)

    @transaction
    def reset(self, session_id: str, now: datetime) -> SessionView:
        """Start the conversation over: its heartbeat is cleared and never comes back."""
        with self._transaction() as db:
            session = active_session_row(db, session_id, "reset")
            session.conversation += 1
            session.updated_at = now
            clear_departing(db, session_id, now)
            return session_view(session)

    @transaction
    def switch(self, session_id: str, now: datetime) -> SessionView:
        """The chat moves to a new conversation; the departing one keeps no heartbeat."""
        with self._transaction() as db:
            old = active_session_row(db, session_id, "switch away from")
            new = _new_session(db, old.platform, old.chat, old.thread, old.owner, now, None)
            new.webhook_url = old.webhook_url  # the same chat, reached the same way
            _close(old, ClosedReason.SWITCHED, now)
            clear_departing(db, session_id, now)
            return session_view(new)

    @transaction
    def suspend(self, session_id: str, now: datetime) -> SessionView:
        with self._transaction() as db:
            session = active_session_row(db, session_id, "suspend")
            session.status = SessionStatus.SUSPENDED
            session.updated_at = now
            clear_departing(db, session_id, now)
            return session_view(session)

    @transaction
    def resume_session(self, session_id: str, now: datetime) -> SessionView:
        """Open a suspended conversation again; its old heartbeat stays cleared."""
        with self._transaction() as db:
            session = session_row(db, session_id)
            if session.status != SessionStatus.SUSPENDED:
                raise InvalidState(f"Session {session_id} is {session.status}, not suspended.")
            session.status = SessionStatus.ACTIVE
            session.updated_at = now
            return session_view(session)


def resolve_active_row(db: Session, session_id: str) -> SessionRow:
    """``resolve_active`` inside a caller's transaction."""
    row = session_row(db, session_id)
    for _ in range(MAX_COMPRESSIONS_FOLLOWED):
        compressed = ClosedReason.COMPRESSED
        if not (row.status == SessionStatus.CLOSED and row.closed_reason == compressed):
            break
        child = db.scalars(select(SessionRow).where(SessionRow.parent_id == row.id)).first()
        if child is None:
            break
        row = child
    return row


def _new_session(
    db: Session,
    platform: str,
    chat: str,
    thread: str | None,
    owner: str | None,
    now: datetime,
    parent_id: str | None,
) -> SessionRow:
    row = SessionRow(
        id="s" + uuid.uuid4().hex[:15],
        platform=platform,
        chat=chat,
        thread=thread,
        owner=owner,
        status=SessionStatus.ACTIVE,
        parent_id=parent_id,
        conversation=1,
        fence=0,
        created_at=now,
        updated_at=now,
    )
    db.add(row)
    db.flush()
    return row


def _close(row: SessionRow, reason: ClosedReason, now: datetime) -> None:
    row.status = SessionStatus.CLOSED
    row.closed_reason = reason
    row.updated_at = now
