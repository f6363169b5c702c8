"""Delivery retries: a send the platform failed for now (5xx, a timeout, a dropped connection)
is sent again — the same text, the same delivery key, to the same address — never by running
its turn again (no second model call).

The turn records the failed attempt ``retrying`` with what the resend needs (``Resend``, in the
turn's own finish transaction). Beat finds the sessions with a retry due
(``sessions_with_due_retries``) and asks their owners for a drain; the owner, under the session
lock, before anything else runs in it, takes each due retry (``due_retries``), marks it
``pending`` fenced (``begin_retry``), sends and records the outcome fenced (``finish_retry``).
A retry cut off between its send and its record is ``unknown``, found by beat like any pending
record whose turn is gone (``stale_deliveries``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from hbgw.sessions.models import DeliveryRow, SessionRow
from hbgw.sessions.states import DeliveryState, SessionStatus
from hbgw.sessions.store.base import Transactions, fenced_session_row, transaction
from hbgw.sessions.store.deliveries import (
    DeliveryOutcome,
    DeliveryView,
    delivery_view,
    record_outcome_in,
)

# Why a retry that waited in a session that then ended was given up.
ENDED_BEFORE_RETRY = (
    "not sent again: the session was compressed, closed or suspended before the retry was due"
)


@dataclass(frozen=True)
class RetryAttempt:
    """A retry marked pending for a grant: the record, the session's platform and owner."""

    delivery: DeliveryView
    platform: str
    owner: str | None


def due_retries_in(db: Session, session_id: str, now: datetime, limit: int) -> list[DeliveryView]:
    """The session's retrying deliveries due by ``now``, oldest first (message order): read
    with a drain grant's fence claim (``claim_fence``), no transaction of its own."""
    rows = db.scalars(
        select(DeliveryRow)
        .where(
            DeliveryRow.session_id == session_id,
            DeliveryRow.state == DeliveryState.RETRYING,
            DeliveryRow.next_attempt_at <= now,
        )
        .order_by(DeliveryRow.id)
        .limit(limit)
    )
    return [delivery_view(r) for r in rows]


class DeliveryRetries(Transactions):
    @transaction
    def sessions_with_due_retries(self, now: datetime, limit: int) -> list[str]:
        """Active sessions with a retrying delivery due by ``now``, the longest waiting first.

        A retry whose session is no longer active (compressed, closed, suspended) can never
        be sent by its session's grant: it is settled ``failed`` here, with the reason, instead
        of being asked for at every pass for ever."""
        with self._transaction() as db:
            rows = db.execute(
                select(DeliveryRow, SessionRow.status)
                .join(SessionRow, SessionRow.id == DeliveryRow.session_id)
                .where(
                    DeliveryRow.state == DeliveryState.RETRYING,
                    DeliveryRow.next_attempt_at <= now,
                )
                .order_by(DeliveryRow.next_attempt_at, DeliveryRow.id)
                .limit(limit)
            ).all()
            due: list[str] = []
            for row, status in rows:
                if status == SessionStatus.ACTIVE:
                    due.append(row.session_id)
                    continue
                row.state, row.next_attempt_at, row.updated_at = DeliveryState.FAILED, None, now
                row.error = ENDED_BEFORE_RETRY
            return list(dict.fromkeys(due))

    @transaction
    def begin_retry(self, delivery_id: int, fence: int, now: datetime) -> RetryAttempt | None:
        """The fenced mark before a retry's send: ``pending`` under the grant ``fence``, one
        more attempt. ``StaleFence`` when a newer grant holds the session; None when the record
        is no longer retrying (another grant sent it)."""
        with self._transaction() as db:
            row = db.get(DeliveryRow, delivery_id, with_for_update=True)
            if row is None:
                return None
            session = fenced_session_row(db, row.session_id, fence)
            if row.state == DeliveryState.PENDING and row.fence == fence and row.text is not None:
                return RetryAttempt(delivery_view(row), session.platform, session.owner)  # a repeat
            if row.state != DeliveryState.RETRYING or row.text is None:
                return None
            row.state = DeliveryState.PENDING
            row.fence = fence
            row.attempts += 1
            row.updated_at = now
            return RetryAttempt(delivery_view(row), session.platform, session.owner)

    @transaction
    def finish_retry(
        self, session_id: str, fence: int, outcome: DeliveryOutcome, now: datetime
    ) -> None:
        """How a retry's send ended, fenced (``StaleFence``: a newer grant holds the session;
        its record, still pending, is settled ``unknown`` by beat)."""
        with self._transaction() as db:
            fenced_session_row(db, session_id, fence)
            record_outcome_in(db, fence, outcome, now)
