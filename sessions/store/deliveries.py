"""The delivery record: one row per outbound message, written inside the turn's own
transactions — pending with the fenced mark just before the send (``mark_delivering``,
``begin_reply``), the outcome with the finish (``finish_fire``, the reply's ``add_message``).

A pending record whose turn can no longer write its outcome is ``unknown``: the message may
have left. It is found where cut-off turns are found — a newer grant's claim (``fire_rows.claim``
settles the run), a later attempt at the same key (``begin_reply``), or beat once the record
stayed pending past HBGW_DEAD_AFTER with the session lock free (``settle_cut_off_delivery``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from hbgw.core.clock import iso
from hbgw.sessions.models import DELIVERY_ERROR_CHARS, PLATFORM_MESSAGE_ID_CHARS, DeliveryRow
from hbgw.sessions.states import DeliveryState
from hbgw.sessions.store import ledger_sql
from hbgw.sessions.store.base import Transactions, transaction

# What an unknown record says: the one fact known about it.
CUT_OFF_ERROR = "cut off between the send and its record: it may have been sent"
NOT_SENT_ERROR = "not sent: the turn lost its lock before the send"


@dataclass(frozen=True)
class DeliveryView:
    id: int
    run_id: int | None
    message_id: int | None
    session_id: str
    channel: str
    delivery_key: str
    kind: str
    fence: int  # the grant that last marked it pending
    state: DeliveryState
    attempts: int
    platform_message_id: str | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    # A retrying delivery's resend: its text and address, when, and whether it is marked.
    text: str | None = None
    chat: str | None = None
    thread: str | None = None
    reply_to: str | None = None
    next_attempt_at: datetime | None = None
    maybe_sent: bool = False

    @property
    def outcome(self) -> str:
        """In a word, for people: delivered, suppressed, failed, unknown, retrying, pending."""
        return "delivered" if self.state == DeliveryState.SENT else str(self.state)

    def to_json(self) -> dict[str, Any]:
        """Without SQL's ids (the API shows public ones only; the key names what it is)."""
        return {
            "channel": self.channel,
            "kind": self.kind,
            "delivery_key": self.delivery_key,
            "state": self.state,
            "outcome": self.outcome,
            "attempts": self.attempts,
            "platform_message_id": self.platform_message_id,
            "error": self.error,
            "next_attempt_at": iso(self.next_attempt_at),
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }


@dataclass(frozen=True)
class Outbound:
    """One message a turn is about to send: its delivery key and kind."""

    key: str
    kind: str


@dataclass(frozen=True)
class Resend:
    """What a ``retrying`` delivery sends again: the same text to the same address, at
    ``next_attempt_at``; ``maybe_sent``: an earlier attempt may have been posted (a timeout, a
    dropped connection), so the resend carries the possible-repeat mark."""

    text: str
    chat: str
    thread: str | None
    reply_to: str | None
    next_attempt_at: datetime
    maybe_sent: bool


@dataclass(frozen=True)
class DeliveryOutcome:
    """How one send ended (sent, failed, suppressed or retrying), for its record;
    ``permanent``: the route refused it for good (its heartbeat is paused); ``resend``: what a
    ``retrying`` one sends again."""

    key: str
    state: DeliveryState
    platform_message_id: str | None = None
    error: str | None = None
    permanent: bool = False
    reason: str | None = None  # the platform's word for a failure (not_in_channel, http_503)
    resend: Resend | None = None


def delivery_view(row: DeliveryRow) -> DeliveryView:
    return DeliveryView(
        id=row.id,
        run_id=row.run_id,
        message_id=row.message_id,
        session_id=row.session_id,
        channel=row.channel,
        delivery_key=row.delivery_key,
        kind=row.kind,
        fence=row.fence,
        state=row.state,
        attempts=row.attempts,
        platform_message_id=row.platform_message_id,
        error=row.error,
        created_at=row.created_at,
        updated_at=row.updated_at,
        text=row.text,
        chat=row.chat,
        thread=row.thread,
        reply_to=row.reply_to,
        next_attempt_at=row.next_attempt_at,
        maybe_sent=bool(row.maybe_sent),
    )


@dataclass(frozen=True)
class Owner:
    """Whom the records belong to: a heartbeat run or a user message, in a session, sent by
    the grant ``fence`` through ``channel``."""

    session_id: str
    fence: int
    channel: str
    run_id: int | None = None
    message_id: int | None = None


def mark_pending_in(db: Session, owner: Owner, outbound: Sequence[Outbound], now: datetime) -> int:
    """Mark each delivery pending for the grant ``owner.fence``; the number of earlier attempts
    found still pending (cut off: their outcome is ``unknown``, now tried again)."""
    keys = [o.key for o in outbound]
    found = {
        r.delivery_key: r
        for r in db.scalars(select(DeliveryRow).where(DeliveryRow.delivery_key.in_(keys)))
    }
    cut_off = 0
    for item in outbound:
        row = found.get(item.key)
        if row is None:
            db.add(_row(owner, item, DeliveryState.PENDING, 1, now))
            continue
        if row.state == DeliveryState.PENDING and row.fence == owner.fence:
            continue  # this grant's own repeat after a COMMIT whose answer was lost
        cut_off += row.state == DeliveryState.PENDING
        row.state = DeliveryState.PENDING
        row.fence = owner.fence
        row.attempts += 1
        row.platform_message_id = row.error = None
        row.updated_at = now
    return cut_off


def record_outcome_in(db: Session, fence: int, outcome: DeliveryOutcome, now: datetime) -> None:
    """The outcome of the grant ``fence``'s send: one UPDATE of its pending record (none left
    when this is a repeat after a lost COMMIT, or a newer grant took the record over). A
    ``retrying`` outcome keeps what its resend needs; any other clears it."""
    again = outcome.resend
    db.flush()  # any ORM row of the caller's first: a Core statement does not autoflush
    db.info["wrote"] = True  # a Core write: a COMMIT cut off after it is ambiguous
    db.connection().execute(
        ledger_sql.RECORD_OUTCOME,
        {
            "p_key": outcome.key,
            "p_fence": fence,
            "p_state": outcome.state,
            "p_platform_message_id": _bounded(
                outcome.platform_message_id, PLATFORM_MESSAGE_ID_CHARS
            ),
            "p_error": _bounded(outcome.error, DELIVERY_ERROR_CHARS),
            "p_now": now,
            "p_text": again.text if again else None,
            "p_chat": again.chat if again else None,
            "p_thread": again.thread if again else None,
            "p_reply_to": again.reply_to if again else None,
            "p_next_attempt_at": again.next_attempt_at if again else None,
            "p_maybe_sent": again.maybe_sent if again else None,
        },
    )


def insert_suppressed_in(db: Session, owner: Owner, outbound: Outbound, now: datetime) -> None:
    """A message with nothing to say (a heartbeat's silence): recorded, never sent."""
    db.info["wrote"] = True  # a Core write, as above
    values = delivery_values(owner, outbound, DeliveryState.SUPPRESSED, 0, now)
    db.connection().execute(ledger_sql.INSERT_DELIVERY, values)


def settle_pending_in(db: Session, *, run_id: int, now: datetime, sent_maybe: bool) -> int:
    """A run's turn will never record its delivery: ``unknown`` if the send may have happened
    (``sent_maybe``), else ``failed`` (nothing left). The number of records it settled."""
    state, error = (
        (DeliveryState.UNKNOWN, CUT_OFF_ERROR)
        if sent_maybe
        else (DeliveryState.FAILED, NOT_SENT_ERROR)
    )
    result = db.execute(
        update(DeliveryRow)
        .where(DeliveryRow.run_id == run_id, DeliveryRow.state == DeliveryState.PENDING)
        .values(state=state, error=error, updated_at=now)
    )
    return int(getattr(result, "rowcount", 0) or 0)


def take_back_in(
    db: Session, message_id: int, fence: int, keys: Sequence[str], now: datetime, *, earlier: bool
) -> None:
    """The grant ``fence`` stopped before sending ``keys``: those attempts did not happen.
    ``earlier``: an older grant's attempt is still unaccounted for, so the record stays
    ``unknown``; otherwise it is ``failed`` (not sent) until the next grant tries again."""
    state, error = (
        (DeliveryState.UNKNOWN, CUT_OFF_ERROR)
        if earlier
        else (DeliveryState.FAILED, NOT_SENT_ERROR)
    )
    db.execute(
        update(DeliveryRow)
        .where(
            DeliveryRow.message_id == message_id,
            DeliveryRow.fence == fence,
            DeliveryRow.state == DeliveryState.PENDING,
            DeliveryRow.delivery_key.in_(list(keys)),
        )
        .values(state=state, error=error, attempts=DeliveryRow.attempts - 1, updated_at=now)
    )


def deliveries_of_runs(db: Session, run_ids: Sequence[int]) -> dict[int, DeliveryView]:
    """Each run's delivery record (one query for a page of runs)."""
    if not run_ids:
        return {}
    rows = db.scalars(select(DeliveryRow).where(DeliveryRow.run_id.in_(list(run_ids))))
    return {r.run_id: delivery_view(r) for r in rows if r.run_id is not None}


def _row(
    owner: Owner, outbound: Outbound, state: DeliveryState, attempts: int, now: datetime
) -> DeliveryRow:
    return DeliveryRow(**delivery_values(owner, outbound, state, attempts, now))


def delivery_values(
    owner: Owner, outbound: Outbound, state: DeliveryState, attempts: int, now: datetime
) -> dict[str, Any]:
    """A new delivery record's columns (an ORM row's, or ``ledger_sql.INSERT_DELIVERY``'s)."""
    return dict(
        run_id=owner.run_id,
        message_id=owner.message_id,
        session_id=owner.session_id,
        channel=owner.channel[:32],
        delivery_key=outbound.key,
        kind=outbound.kind,
        fence=owner.fence,
        state=state,
        attempts=attempts,
        created_at=now,
        updated_at=now,
    )


def _bounded(text: str | None, limit: int) -> str | None:
    return None if text is None else text[:limit]


class DeliveryRecords(Transactions):
    @transaction
    def stale_deliveries(self, before: datetime, limit: int | None = None) -> list[DeliveryView]:
        """User-turn deliveries, and retries of any, still pending since before ``before``,
        oldest first: candidates for ``settle_cut_off_delivery`` (a heartbeat's first attempt
        is settled with its run; a retry runs after its run finished)."""
        with self._transaction() as db:
            rows = db.scalars(
                select(DeliveryRow)
                .where(
                    DeliveryRow.state == DeliveryState.PENDING,
                    DeliveryRow.updated_at < before,
                    or_(DeliveryRow.message_id.is_not(None), DeliveryRow.text.is_not(None)),
                )
                .order_by(DeliveryRow.updated_at, DeliveryRow.id)
                .limit(limit)
            )
            return [delivery_view(r) for r in rows]

    @transaction
    def settle_cut_off_delivery(
        self, delivery_id: int, fence: int, now: datetime
    ) -> DeliveryView | None:
        """A pending record of the grant ``fence`` whose turn was cut off (the caller saw the
        session lock free past HBGW_DEAD_AFTER): ``unknown``. None if it moved on meanwhile
        (an outcome written, or a newer grant's attempt pending under its own fence)."""
        with self._transaction() as db:
            row = db.get(DeliveryRow, delivery_id, with_for_update=True)
            if row is None or row.state != DeliveryState.PENDING or row.fence != fence:
                return None
            row.state = DeliveryState.UNKNOWN
            row.error = CUT_OFF_ERROR
            row.updated_at = now
            return delivery_view(row)
