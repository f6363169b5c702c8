"""A cron job's fire path's own SQL as named Core statements, beside the heartbeat's
(``ledger_sql.py``, whose run, session and message statements a job's run shares): the job's row,
read locked and written whole, in one statement each, and a routed run's fresh session made
from it. ``job_rows.py`` runs them.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Insert, Table, bindparam, literal, select, update
from sqlalchemy.dialects import postgresql, sqlite

from hbgw.sessions.models import JobRow, SessionRow
from hbgw.sessions.states import SessionStatus

JOBS: Table = JobRow.__table__  # type: ignore[assignment]
SESSIONS: Table = SessionRow.__table__  # type: ignore[assignment]

# The begin and the finish lock the job's row for their read-then-write, as every change of a
# job does (``job_records.py``): a pause, a resume or a cancel comes wholly before or after.
JOB_FOR_UPDATE = select(JOBS).where(JOBS.c.id == bindparam("p_job_id")).with_for_update()

# Admission reads a batch's jobs in one statement (an expanding IN, one cache entry).
JOBS_BY_ID = select(JOBS).where(JOBS.c.id.in_(bindparam("p_ids", expanding=True)))

# A job's state written whole (``job_records.job_state_values``), or only its last outcome, in
# one UPDATE; its columns come from the parameters.
UPDATE_JOB = update(JOBS).where(JOBS.c.id == bindparam("p_job_id"))


def _run_session(dialect_insert: Callable[[Table], postgresql.Insert | sqlite.Insert]) -> Insert:
    made_at = SESSIONS.c.created_at.type
    made = select(
        bindparam("p_session_id", type_=SESSIONS.c.id.type),
        JOBS.c.platform,
        JOBS.c.chat,
        JOBS.c.thread,
        JOBS.c.owner,
        literal(SessionStatus.ACTIVE, SESSIONS.c.status.type),
        literal(1, SESSIONS.c.conversation.type),
        literal(0, SESSIONS.c.fence.type),
        bindparam("p_now", type_=made_at).label("created_at"),
        bindparam("p_now", type_=made_at).label("updated_at"),
    ).where(JOBS.c.id == bindparam("p_job_id"), JOBS.c.session_id.is_(None))
    columns = ["id", "platform", "chat", "thread", "owner", "status", "conversation", "fence"]
    insert = dialect_insert(SESSIONS).from_select([*columns, "created_at", "updated_at"], made)
    return insert.on_conflict_do_nothing(index_elements=[SESSIONS.c.id])


# A routed job's run gets a fresh session, made from the job's route by the run's begin, before
# its claim: made by the first begin of the fire, found by a repeat or a second delivery (ON
# CONFLICT DO NOTHING: no error, no second statement). ON CONFLICT is a dialect's own construct
# in SQLAlchemy, so the statement is built once for each, and the connection's is run.
RUN_SESSION: dict[str, Insert] = {
    "postgresql": _run_session(postgresql.insert),
    "sqlite": _run_session(sqlite.insert),
}
