"""Retention: settled runs (with their delivery records) and answered messages older than a
cutoff are deleted in bounded batches, each batch one short transaction.

What stays, whatever its age: a run still in flight (reserved, in its turn, delivering), a
message still queued, anything with a delivery that is pending or retrying, a user message or
run whose turn is in flight, the run that marks a routed cron job's own session (while that
session is open: it keeps inbound chat messages out of it), and the newest row of each table
(SQLite reuses the highest rowid once it is gone; ids must only grow).

Counts read from the ledger stay exact: the fire count check (I3) adds ``retired_runs`` back,
kept per heartbeat in the same transaction as the delete; tokens today read only today's runs,
which a cutoff of a day or more never reaches; fences, dedupe and backoff live on their rows.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, func, select
from sqlalchemy.orm import Session

from hbgw.sessions.models import DeliveryRow, HeartbeatRow, JobRow, MessageRow, RunRow, SessionRow
from hbgw.sessions.states import (
    IN_TURN,
    SETTLED,
    DeliveryState,
    MessageState,
    RunState,
    SessionStatus,
)
from hbgw.sessions.store.base import Transactions, transaction

OPEN_DELIVERIES = (DeliveryState.PENDING, DeliveryState.RETRYING)
IN_FLIGHT = (RunState.RESERVED, *IN_TURN)


class Retention(Transactions):
    @transaction
    def retire_runs(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` settled runs reserved before ``before``, oldest first, with
        their delivery records; the number deleted (fewer than ``limit``: none left)."""
        with self._transaction() as db:
            ids = _keep_open_deliveries(db, _old_runs(db, before, limit), DeliveryRow.run_id)
            if not ids:
                return 0
            _count_retired(db, ids)
            db.execute(delete(DeliveryRow).where(DeliveryRow.run_id.in_(ids)))
            db.execute(delete(RunRow).where(RunRow.id.in_(ids)))
            return len(ids)

    @transaction
    def retire_messages(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` answered messages created before ``before``, oldest first,
        with their delivery records; the number deleted."""
        with self._transaction() as db:
            ids = _keep_open_deliveries(
                db, _old_messages(db, before, limit), DeliveryRow.message_id
            )
            if not ids:
                return 0
            db.execute(delete(DeliveryRow).where(DeliveryRow.message_id.in_(ids)))
            db.execute(delete(MessageRow).where(MessageRow.id.in_(ids)))
            return len(ids)


def _old_runs(db: Session, before: datetime, limit: int) -> list[int]:
    # Oldest ids first: they are the oldest reservations, so the primary key's range answers.
    newest = select(func.max(RunRow.id)).scalar_subquery()
    job_session_open = exists().where(
        JobRow.id == RunRow.job_id,
        JobRow.session_id.is_(None),
        SessionRow.id == RunRow.session_id,
        SessionRow.status != SessionStatus.CLOSED,
    )
    query = (
        select(RunRow.id)
        .where(
            RunRow.reserved_at < before,
            RunRow.state.in_(SETTLED),
            RunRow.id < newest,
            ~job_session_open,
        )
        .order_by(RunRow.id)
        .limit(limit)
        # Another beat's batch (or a late writer) holding a row: skipped, taken next time.
        .with_for_update(skip_locked=True)
    )
    return list(db.scalars(query))


def _old_messages(db: Session, before: datetime, limit: int) -> list[int]:
    newest = select(func.max(MessageRow.id)).scalar_subquery()
    # The prompt of a run in flight is read again by its turn (and a retried delivery).
    turn_in_flight = exists().where(
        RunRow.fire_id == MessageRow.fire_id, RunRow.state.in_(IN_FLIGHT)
    )
    query = (
        select(MessageRow.id)
        .where(
            MessageRow.created_at < before,
            MessageRow.state == MessageState.DONE,
            MessageRow.id < newest,
            ~turn_in_flight,
        )
        .order_by(MessageRow.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list(db.scalars(query))


def _keep_open_deliveries(db: Session, ids: list[int], column: Any) -> list[int]:
    """``ids`` (of ``column``'s owners: DeliveryRow.run_id or .message_id) without those whose
    delivery is still open, or owns the newest delivery record."""
    if not ids:
        return []
    newest = db.scalar(select(func.max(DeliveryRow.id)))
    rows = db.execute(select(column, DeliveryRow.id, DeliveryRow.state).where(column.in_(ids)))
    kept = {o for o, d, state in rows if state in OPEN_DELIVERIES or d == newest}
    return [i for i in ids if i not in kept]


def _count_retired(db: Session, ids: list[int]) -> None:
    """Add the deleted runs that the fire count counts to their heartbeats' ``retired_runs``."""
    rows = db.execute(
        select(RunRow.heartbeat_id, RunRow.state, RunRow.reserved_at).where(
            RunRow.id.in_(ids), RunRow.heartbeat_id.is_not(None)
        )
    ).all()
    runs = [(h, state, reserved) for h, state, reserved in rows if h is not None]
    if not runs:
        return
    heartbeat_ids = sorted({h for h, _, _ in runs})
    # Locked in id order: a concurrent set (new set_at) is either before or after this count.
    heartbeats = db.scalars(
        select(HeartbeatRow)
        .where(HeartbeatRow.id.in_(heartbeat_ids))
        .order_by(HeartbeatRow.id)
        .with_for_update()
    ).all()
    set_at = {h.id: h.set_at for h in heartbeats}
    counted = Counter(
        h for h, state, reserved in runs if state != RunState.REFUNDED and reserved >= set_at[h]
    )
    for row in heartbeats:
        n = counted.get(row.id, 0)
        if not n:
            continue
        same = row.retired_set_at == row.set_at
        row.retired_runs = (row.retired_runs or 0) + n if same else n
        row.retired_set_at = row.set_at
