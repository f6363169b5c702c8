"""What beat's restore pass reads, one bounded page at a time (keyset pagination).

Each page is one short transaction that reads at most ``limit`` rows through an index
(``ix_heartbeats_status_session``, ``ix_messages_state_id``), continuing after the last key
of the previous page: the cost of a page does not grow with the table. On SQLite every
transaction takes the write lock (``BEGIN IMMEDIATE``), so a short page also keeps a large
fleet's restore from holding the writers off for seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import and_, or_, select

from hbgw.sessions.models import HeartbeatRow, MessageRow, SessionRow
from hbgw.sessions.states import ClosedReason, HeartbeatStatus, MessageState, SessionStatus
from hbgw.sessions.store.base import Transactions, transaction


@dataclass(frozen=True)
class RestoreEntry:
    """One active heartbeat of an active session, for the restore pass."""

    session_id: str
    next_due_at: datetime
    fence: int


@dataclass(frozen=True)
class RestorablePage:
    entries: list[RestoreEntry]
    rows: int  # rows read: a page with fewer than its limit is the last one
    last_session: str  # where the next page starts ("" when empty)


@dataclass(frozen=True)
class QueuedPage:
    by_session: dict[str, list[int]] = field(default_factory=dict)  # message ids, oldest first
    rows: int = 0
    last_id: int = 0


def _check_limit(limit: int) -> None:
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")


class RestoreReads(Transactions):
    @transaction
    def restorable_page(self, after: str, limit: int) -> RestorablePage:
        """Active heartbeats of active sessions with a session id above ``after``, by id.

        Only the columns the due time needs are read, not whole rows.
        """
        _check_limit(limit)
        with self._transaction() as db:
            rows = db.execute(
                select(
                    HeartbeatRow.session_id,
                    HeartbeatRow.next_due_at,
                    SessionRow.fence,
                    SessionRow.status,
                )
                .join(SessionRow, SessionRow.id == HeartbeatRow.session_id)
                .where(HeartbeatRow.status == HeartbeatStatus.ACTIVE)
                .where(HeartbeatRow.session_id > after)
                .order_by(HeartbeatRow.session_id)
                .limit(limit)
            ).all()
        entries = [
            RestoreEntry(sid, due, fence)
            for sid, due, fence, status in rows
            # Filtered here, not in SQL: the page stays a plain range of the index, and a
            # suspended session's heartbeat is cleared with it, so such rows are rare. The due
            # time is the one every write stores with the state (policies included); NULL: an
            # ended heartbeat (its fire count or end reached), due never.
            if status == SessionStatus.ACTIVE and due is not None
        ]
        return RestorablePage(entries, len(rows), rows[-1][0] if rows else "")

    @transaction
    def queued_page(self, after_id: int, limit: int) -> QueuedPage:
        """Queued user messages with an id above ``after_id`` of the sessions that answer them.

        Active sessions, and sessions closed by compression: a message queued before a
        compression is answered in the conversation it was sent to. Ids grow with arrival, so
        each session's list is oldest first.
        """
        _check_limit(limit)
        answering = or_(
            SessionRow.status == SessionStatus.ACTIVE,
            and_(
                SessionRow.status == SessionStatus.CLOSED,
                SessionRow.closed_reason == ClosedReason.COMPRESSED,
            ),
        )
        with self._transaction() as db:
            rows = db.execute(
                select(MessageRow.id, MessageRow.session_id, answering)
                .join(SessionRow, SessionRow.id == MessageRow.session_id)
                .where(MessageRow.state == MessageState.QUEUED, MessageRow.id > after_id)
                .order_by(MessageRow.id)
                .limit(limit)
            ).all()
        by_session: dict[str, list[int]] = {}
        for message_id, session_id, answered in rows:
            if answered:
                by_session.setdefault(session_id, []).append(message_id)
        return QueuedPage(by_session, len(rows), rows[-1][0] if rows else 0)
