"""Messages of a conversation: user messages wait queued for a turn, replies answer them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from core.errors import NotFound
from sessions.models import MessageRow
from sessions.states import MessageState
from sessions.store.base import Transactions, fenced_session_row, session_row


@dataclass(frozen=True)
class MessageView:
    id: int
    session_id: str
    conversation: int
    role: str
    kind: str
    text: str
    fire_id: str | None
    reply_to: int | None
    state: MessageState
    created_at: datetime


def message_view(row: MessageRow) -> MessageView:
    return MessageView(
        id=row.id,
        session_id=row.session_id,
        conversation=row.conversation,
        role=row.role,
        kind=row.kind,
        text=row.text,
        fire_id=row.fire_id,
        reply_to=row.reply_to,
        state=row.state,
        created_at=row.created_at,
    )


class MessageRecords(Transactions):
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
        state: MessageState = MessageState.DONE,
        fence: int | None = None,
    ) -> MessageView:
        """Store a message; a turn passes its fence so a turn that lost its lock cannot."""
        with self._transaction() as db:
            if fence is None:
                session = session_row(db, session_id)
            else:
                session = fenced_session_row(db, session_id, fence)
            row = MessageRow(
                session_id=session_id,
                conversation=session.conversation,
                role=role,
                kind=kind,
                text=text,
                fire_id=fire_id,
                reply_to=reply_to,
                state=MessageState(state),
                created_at=now,
            )
            db.add(row)
            db.flush()
            return message_view(row)

    def get_message(self, message_id: int) -> MessageView:
        with self._transaction() as db:
            row = db.get(MessageRow, message_id)
            if row is None:
                raise NotFound(f"There is no message {message_id}.")
            return message_view(row)

    def reply_for(self, message_id: int) -> MessageView | None:
        """The assistant reply or notice answering a user message, once there is one."""
        with self._transaction() as db:
            row = db.scalars(
                select(MessageRow).where(MessageRow.reply_to == message_id).order_by(MessageRow.id)
            ).first()
            return message_view(row) if row else None

    def mark_message_done(self, message_id: int, *, fence: int | None = None) -> None:
        with self._transaction() as db:
            row = db.get(MessageRow, message_id)
            if row is not None:
                if fence is not None:
                    fenced_session_row(db, row.session_id, fence)
                row.state = MessageState.DONE

    def list_messages(self, session_id: str, *, limit: int = 100) -> list[MessageView]:
        with self._transaction() as db:
            rows = db.scalars(
                select(MessageRow)
                .where(MessageRow.session_id == session_id)
                .order_by(MessageRow.id.desc())
                .limit(limit)
            )
            return [message_view(r) for r in reversed(list(rows))]
