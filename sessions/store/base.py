"""What every concern of the store shares: one transaction per public method, and row lookups."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from core.errors import InvalidState, NotFound, StaleFence
from sessions.models import HeartbeatRow, RunRow, SessionRow
from sessions.states import SessionStatus


class Transactions:
    """The base of every store concern: ``_transaction()`` is the only way to reach the rows."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._make_orm_session = sessionmaker(engine, expire_on_commit=False)

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        with self._make_orm_session() as db, db.begin():
            yield db


def session_row(db: Session, session_id: str, *, for_update: bool = False) -> SessionRow:
    query = select(SessionRow).where(SessionRow.id == session_id)
    if for_update:
        query = query.with_for_update()
    row = db.scalars(query).first()
    if row is None:
        raise NotFound(
            f"There is no session {session_id!r} — `hbgw session create` makes one and "
            "prints its id."
        )
    return row


def active_session_row(db: Session, session_id: str, verb: str) -> SessionRow:
    """The session, locked, if it is active; ``verb`` names the refused action."""
    row = session_row(db, session_id, for_update=True)
    if row.status != SessionStatus.ACTIVE:
        reason = f" ({row.closed_reason})" if row.closed_reason else ""
        raise InvalidState(f"Cannot {verb} session {session_id}: it is {row.status}{reason}.")
    return row


def fenced_session_row(db: Session, session_id: str, fence: int) -> SessionRow:
    """The session, locked, if ``fence`` is still its newest: a turn that lost its lock fails."""
    row = session_row(db, session_id, for_update=True)
    if row.fence != fence:
        raise StaleFence(
            f"Session {session_id} is now fenced at {row.fence}; a write with fence "
            f"{fence} comes from a turn that lost its lock and is rejected."
        )
    return row


def heartbeat_row(db: Session, session_id: str) -> HeartbeatRow | None:
    return db.scalars(select(HeartbeatRow).where(HeartbeatRow.session_id == session_id)).first()


def run_row(db: Session, run_id: int) -> RunRow:
    run = db.get(RunRow, run_id, with_for_update=True)
    if run is None:
        raise NotFound(f"There is no run {run_id}.")
    return run
