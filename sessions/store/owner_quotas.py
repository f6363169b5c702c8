"""The per-owner quotas (``sessions/quotas.py``), checked inside the transaction that adds a
session, a heartbeat or a cron job, so no path around the API escapes them.

Count-then-insert would let two transactions at the last slot both pass; the check holds the
owner first, so the second waits for the first to commit and then counts its row. SQLite's
writers already queue (every transaction begins IMMEDIATE, ``sessions/db.py``); on PostgreSQL a
transaction-scoped advisory lock on the owner serialises them (READ COMMITTED: the count after
the lock sees what the previous holder committed). The lock is taken after any session row the
step locks and nothing is locked after it, so it adds no lock cycle.

The fresh session of a routed cron job's run is not counted: the job is (``HBGW_API_MAX_JOBS_PER_
OWNER``), and its runs are the gateway's doing, not the owner's.
"""

from __future__ import annotations

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from hbgw.sessions.models import HeartbeatRow, JobRow, SessionRow
from hbgw.sessions.quotas import (
    OwnerQuotas,
    heartbeats_exceeded,
    jobs_exceeded,
    sessions_exceeded,
)
from hbgw.sessions.states import HeartbeatStatus, JobStatus, SessionStatus
from hbgw.sessions.store.base import a_job_runs_own_session

LOCK_PREFIX = "quota\x1f"


def hold_owner(db: Session, owner: str) -> None:
    """Serialise this owner's quota checks until the transaction ends (PostgreSQL; SQLite's
    writers are serialised already)."""
    if db.get_bind().dialect.name == "postgresql":
        db.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
            {"k": LOCK_PREFIX + owner},
        )


def check_session_room(db: Session, quotas: OwnerQuotas, owner: str | None) -> None:
    """One more session for ``owner``, or ``QuotaExceeded``."""
    if not quotas.sessions or owner is None:
        return
    hold_owner(db, owner)
    query = select(func.count()).select_from(SessionRow)
    query = query.where(
        SessionRow.owner == owner,
        SessionRow.status != SessionStatus.CLOSED,
        ~a_job_runs_own_session(),
    )
    if int(db.scalar(query) or 0) >= quotas.sessions:
        raise sessions_exceeded(quotas.sessions)


def check_heartbeat_room(
    db: Session, quotas: OwnerQuotas, owner: str | None, session_id: str
) -> None:
    """One more live heartbeat for ``owner`` in ``session_id`` (which has none), or
    ``QuotaExceeded``."""
    if not quotas.heartbeats or owner is None:
        return
    hold_owner(db, owner)
    query = (
        select(func.count())
        .select_from(HeartbeatRow)
        .join(SessionRow, SessionRow.id == HeartbeatRow.session_id)
        .where(
            SessionRow.owner == owner,
            HeartbeatRow.status != HeartbeatStatus.CLEARED,
            HeartbeatRow.session_id != session_id,
        )
    )
    if int(db.scalar(query) or 0) >= quotas.heartbeats:
        raise heartbeats_exceeded(quotas.heartbeats)


def check_job_room(db: Session, quotas: OwnerQuotas, owner: str | None) -> None:
    """One more cron job for ``owner``, or ``QuotaExceeded``."""
    if not quotas.jobs or owner is None:
        return
    hold_owner(db, owner)
    live = (JobStatus.ACTIVE, JobStatus.PAUSED)
    query = select(func.count()).select_from(JobRow)
    query = query.where(JobRow.owner == owner, JobRow.status.in_(live))
    if int(db.scalar(query) or 0) >= quotas.jobs:
        raise jobs_exceeded(quotas.jobs)
