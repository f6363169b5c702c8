"""Messages of a conversation: user messages wait queued for a turn, replies answer them.

SQL is the truth for messages: a user message is accepted once per idempotency key, stays
``queued`` until the reply that answers it is written (in the same transaction), and the restore
pass puts every queued one back into Redis when Redis lost it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Row, func, select
from sqlalchemy.orm import Session

from hbgw.core.clock import iso
from hbgw.core.errors import NotFound
from hbgw.core.usage import TokenUsage, usage_of
from hbgw.sessions.models import MODEL_CHARS, MessageRow, SessionRow
from hbgw.sessions.states import MessageState
from hbgw.sessions.store.base import Transactions, fenced_session_row, session_row, transaction
from hbgw.sessions.store.deliveries import DeliveryOutcome, record_outcome_in
from hbgw.sessions.store.session_records import SessionView, session_view
from hbgw.sessions.validation import check_idempotency_key, check_user_text


class MessageKey(NamedTuple):
    """What finds a message: its id and ``created_at`` (PostgreSQL's partition key of the
    messages), so a step on it reads one day partition instead of every day's index."""

    id: int
    created_at: datetime


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
    idempotency_key: str | None = None
    # What the agent spent on the turn this message answers (the reply of a user turn).
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str | None = None

    @property
    def key(self) -> MessageKey:
        return MessageKey(self.id, self.created_at)

    @property
    def usage(self) -> TokenUsage | None:
        return usage_of(self.prompt_tokens, self.completion_tokens, self.model)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "conversation": self.conversation,
            "role": self.role,
            "kind": self.kind,
            "text": self.text,
            "fire_id": self.fire_id,
            "reply_to": self.reply_to,
            "state": self.state,
            "created_at": iso(self.created_at),
            "idempotency_key": self.idempotency_key,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "model": self.model,
        }


@dataclass(frozen=True)
class Accepted:
    """A user message as stored; ``duplicate`` when its key was accepted before (a retry)."""

    message: MessageView
    duplicate: bool


@dataclass(frozen=True)
class MessageTurn:
    """A user message with what its turn needs read beside it (``message_turn``)."""

    message: MessageView
    session: SessionView
    history: tuple[MessageView, ...]


def message_view(row: MessageRow | Row[Any]) -> MessageView:
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
        idempotency_key=row.idempotency_key,
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        model=row.model,
    )


class MessageRecords(Transactions):
    @transaction
    def add_message(
        self,
        session_id: str,
        *,
        role: str,
        kind: str,
        text: str,
        now: datetime,
        fire_id: str | None = None,
        reply_to: MessageKey | None = None,
        state: MessageState = MessageState.DONE,
        fence: int | None = None,
        usage: TokenUsage | None = None,
        delivered: DeliveryOutcome | None = None,
    ) -> MessageView:
        """Store a message; a turn passes its fence so a turn that lost its lock cannot.

        A reply (``reply_to``) marks the message it answers done in the same transaction: a
        message is never answered without being marked, nor marked without its answer. ``usage``
        is what the turn spent, stored on the reply in that same fenced transaction; and
        ``delivered``, how its send ended, on the pending record ``begin_reply`` wrote.
        """
        if kind == "user":
            check_user_text(text)
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
                reply_to=reply_to.id if reply_to else None,
                state=MessageState(state),
                created_at=now,
            )
            _spent(row, usage)
            db.add(row)
            if reply_to is not None:
                _mark_done(db, reply_to)
            if delivered is not None:
                assert fence is not None, "an outcome is the sending turn's: it passes its fence"
                record_outcome_in(db, fence, delivered, now)
            db.flush()
            return message_view(row)

    @transaction
    def accept_message(
        self, session_id: str, text: str, *, now: datetime, idempotency_key: str
    ) -> Accepted:
        """Queue a user message, once per key: a retry gets the first message back."""
        check_user_text(text)
        check_idempotency_key(idempotency_key)
        with self._transaction() as db:
            # The row lock queues concurrent accepts of one session, so a retry racing the
            # first attempt finds its row; the UNIQUE constraint is the backstop.
            session = session_row(db, session_id, for_update=True)
            existing = _keyed_in_conversation(db, session, idempotency_key)
            if existing is not None:
                return Accepted(message_view(existing), duplicate=True)
            row = MessageRow(
                session_id=session_id,
                conversation=session.conversation,
                role="user",
                kind="user",
                text=text,
                state=MessageState.QUEUED,
                created_at=now,
                idempotency_key=idempotency_key,
            )
            db.add(row)
            db.flush()
            return Accepted(message_view(row), duplicate=False)

    @transaction
    def message_turn(self, message_id: int, session_id: str, *, history: int) -> MessageTurn:
        """What a user turn reads before its agent, in one transaction: the message, the
        session it is answered in and the last ``history`` messages before it, oldest first."""
        with self._transaction() as db:
            # By id alone: the id comes from the session's inbox in Redis, which holds no more,
            # so PostgreSQL looks in each day's partition (its primary key's index) once.
            row = db.scalars(select(MessageRow).where(MessageRow.id == message_id)).first()
            if row is None:
                raise NotFound(f"There is no message {message_id}.")
            session = session_view(session_row(db, session_id))
            before = db.scalars(
                select(MessageRow)
                .where(MessageRow.session_id == row.session_id, MessageRow.id < message_id)
                .order_by(MessageRow.id.desc())
                .limit(history)
            )
            earlier = tuple(message_view(r) for r in reversed(list(before)))
            return MessageTurn(message_view(row), session, earlier)

    @transaction
    def reply_for(self, message_id: int) -> MessageView | None:
        """The assistant reply or notice answering a user message, once there is one."""
        with self._transaction() as db:
            row = db.scalars(
                select(MessageRow).where(MessageRow.reply_to == message_id).order_by(MessageRow.id)
            ).first()
            return message_view(row) if row else None

    @transaction
    def list_messages(
        self, session_id: str, *, limit: int = 100, before: int | None = None
    ) -> list[MessageView]:
        """The last ``limit`` messages, oldest first; ``before``: only those older than that id."""
        query = select(MessageRow).where(MessageRow.session_id == session_id)
        if before is not None:
            query = query.where(MessageRow.id < before)
        with self._transaction() as db:
            rows = db.scalars(query.order_by(MessageRow.id.desc()).limit(limit))
            return [message_view(r) for r in reversed(list(rows))]

    @transaction
    def messages_after(self, session_id: str, after: int, *, limit: int) -> list[MessageView]:
        """The session's messages with an id above ``after``, oldest first (pages, streams)."""
        with self._transaction() as db:
            rows = db.scalars(
                select(MessageRow)
                .where(MessageRow.session_id == session_id, MessageRow.id > after)
                .order_by(MessageRow.id)
                .limit(limit)
            )
            return [message_view(r) for r in rows]

    @transaction
    def newest_message_id(self) -> int:
        """The highest message id there is (0 without messages): where a sweep starts."""
        with self._transaction() as db:
            return int(db.scalar(select(func.max(MessageRow.id))) or 0)

    @transaction
    def sessions_with_messages_after(self, after: int) -> dict[str, int]:
        """Each session's newest message id above ``after``: the event streams' sweep for a
        wake-up lost, one indexed range read of the primary key for a whole API process."""
        with self._transaction() as db:
            rows = db.execute(
                select(MessageRow.session_id, func.max(MessageRow.id))
                .where(MessageRow.id > after)
                .group_by(MessageRow.session_id)
            )
            return {str(sid): int(top) for sid, top in rows}


def _keyed_in_conversation(db: Session, session: SessionRow, key: str) -> MessageRow | None:
    """The message accepted under ``key`` by this session or any it continues.

    Compression continues a conversation under a child session: a retry whose first attempt
    was accepted before a compression reaches the child, and must still find that attempt. The
    chain of parents is followed in the same query (a recursive CTE); the UNIQUE index on
    (session, key) answers each step.
    """
    scope: Any = [session.id]
    if session.parent_id is not None:
        start = select(SessionRow.id, SessionRow.parent_id).where(SessionRow.id == session.id)
        chain = start.cte("chain", recursive=True)
        parents = select(SessionRow.id, SessionRow.parent_id).join(
            chain, SessionRow.id == chain.c.parent_id
        )
        scope = select(chain.union_all(parents).c.id)
    return db.scalars(
        select(MessageRow)
        .where(MessageRow.session_id.in_(scope), MessageRow.idempotency_key == key)
        .order_by(MessageRow.id)
    ).first()


def _spent(row: MessageRow, usage: TokenUsage | None) -> None:
    if usage is not None:
        row.prompt_tokens = usage.prompt_tokens
        row.completion_tokens = usage.completion_tokens
        row.model = usage.model[:MODEL_CHARS]


def _mark_done(db: Session, message_key: MessageKey) -> None:
    row = db.get(MessageRow, message_key)
    if row is not None:
        row.state = MessageState.DONE
