"""A cron job's fire path on Core rows (``job_sql``'s statements and ``ledger_sql``'s), each step
inside a caller's transaction: what ``fire_rows.py`` does to a heartbeat's row, done to the job's.
No ORM object is loaded or flushed on the way of a job's run that goes as planned; settling
older turns (``fire_rows.claim``) keeps the ORM steps of ``ledger_steps.py``/``job_steps.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row
from sqlalchemy.orm import Session

from hbgw.sessions import jobs
from hbgw.sessions.states import JobStatus, RefundReason, RunState, SessionStatus
from hbgw.sessions.store import fire_rows as rows
from hbgw.sessions.store import job_sql as sql
from hbgw.sessions.store.job_records import JobView, job_state, job_state_values, job_view_of
from hbgw.sessions.store.message_records import MessageView
from hbgw.sessions.store.run_views import (
    Duplicate,
    RefusalReason,
    Refused,
    RunView,
    run_view,
)


@dataclass(frozen=True)
class JobStarted:
    """The run is started and its prompt stored: ``history`` is the conversation before it."""

    run: RunView
    job: JobView
    message: MessageView
    history: list[MessageView]


@dataclass(frozen=True)
class JobNotStarted:
    """The re-check refused the run: ``refunded`` with ``reason`` in the transaction that
    reserved it (nothing counted, the anchor unchanged), or a run an older grant left, given
    back by a newer one's claim."""

    reason: RefundReason
    run: RunView
    job: JobView


def make_run_session(conn: Connection, session_id: str, job_id: str, now: datetime) -> None:
    """A routed job's run: its fresh session made from the job's route, unless a begin of the
    same fire made it already (``job_sql.RUN_SESSION``)."""
    params = {"p_session_id": session_id, "p_job_id": job_id, "p_now": now}
    conn.execute(sql.RUN_SESSION[conn.dialect.name], params)


def job_for_update(conn: Connection, job_id: str) -> Row[Any] | None:
    return conn.execute(sql.JOB_FOR_UPDATE, {"p_job_id": job_id}).first()


def reserving_job(
    conn: Connection, session: Row[Any], fire_id: str, row: Row[Any] | None, now: datetime
) -> jobs.JobState | Duplicate | Refused:
    """After the claim, in the same transaction: the duplicate (the ledger has the fire id), the
    refusal (the job gone, not active or not due; the session not active), or the state the run
    reserves from."""
    existing = rows.run_of_fire(conn, fire_id)
    if existing is not None:
        return Duplicate(run_view(existing))
    if row is None:
        return Refused(RefusalReason.NO_JOB)
    state = job_state(row)
    if state.status != JobStatus.ACTIVE or session.status != SessionStatus.ACTIVE:
        return Refused(RefusalReason.INACTIVE)
    if not state.is_due(now):
        return Refused(RefusalReason.NOT_DUE, state.next_due())
    return state


def refunded_at_once(
    conn: Connection,
    values: dict[str, Any],
    row: Row[Any],
    state: jobs.JobState,
    reason: RefundReason,
    now: datetime,
) -> JobNotStarted:
    """A reservation the re-check refused, given back in the transaction that made it: the run
    written ``refunded`` with the reason, the job's count and anchor untouched (only its last
    outcome says so), and the fire id taken."""
    run = rows.insert_run(
        conn, values, state=RunState.REFUNDED, finished_at=now, detail=reason.value
    )
    outcome = f"refunded: {reason}"[:255]
    conn.execute(sql.UPDATE_JOB, {"p_job_id": row.id, "last_outcome": outcome, "updated_at": now})
    return JobNotStarted(reason, run, job_view_of(row, state, outcome))


def start(
    db: Session,
    session: Row[Any],
    values: dict[str, Any],
    row: Row[Any],
    state: jobs.JobState,
    prompt: str,
    history: int,
    now: datetime,
) -> JobStarted:
    """The reservation written started (count +1, anchor = now, one UPDATE of the job) and its
    prompt stored."""
    conn = rows.on(db, writes=True)
    run = rows.insert_run(conn, values, state=RunState.STARTED, started_at=now)
    reserved = jobs.reserve(state, now)
    conn.execute(sql.UPDATE_JOB, {"p_job_id": row.id, **job_state_values(reserved, now)})
    message = rows.add_message(
        db, session.id, session.conversation, run.fire_id, "user", "heartbeat", prompt, now
    )
    before = rows.history_before(db, message, history)
    return JobStarted(run, job_view_of(row, reserved, row.last_outcome), message, before)


def begun_before(
    db: Session, session_id: str, fence: int, fire_id: str, history: int
) -> JobStarted | JobNotStarted | None:
    """A repeat of the begin after its own COMMIT was cut off (the fence is claimed and the
    fire's run carries it): what that COMMIT stored. None: another grant's, a stale fence."""
    conn = rows.on(db, writes=False)
    run = rows.own_run_after_cut(conn, session_id, fence, fire_id)  # or StaleFence
    if run is None:
        return None
    row = job_for_update(conn, run.job_id)
    if row is None:
        return None
    job, view = job_view_of(row, job_state(row), row.last_outcome), rows.run_view_of(run)
    if run.state == RunState.REFUNDED:
        return JobNotStarted(RefundReason(run.detail), view, job)
    if run.state != RunState.STARTED:
        return None
    message = rows.prompt_of(db, fire_id, run.started_at)
    return JobStarted(view, job, message, rows.history_before(db, message, history))


def job_outcome(
    conn: Connection, run: Row[Any], row: Row[Any], outcome: RunState, now: datetime
) -> JobView:
    """A run of the job ended ``outcome``, in one UPDATE: its last outcome, and completed when
    it was the last run the job had (a one-shot, the last of ``--times``), unless the job changed
    since (its generation)."""
    state = job_state(row)
    values: dict[str, Any] = {"last_outcome": outcome.value, "updated_at": now}
    if row.generation == run.generation:
        state = jobs.finished(state)
        values = job_state_values(state, now) | values
    conn.execute(sql.UPDATE_JOB, {"p_job_id": row.id, **values})
    return job_view_of(row, state, outcome.value)


def retried(
    conn: Connection, run: Row[Any], row: Row[Any], detail: str, retry_at: datetime, now: datetime
) -> JobView:
    """The failed run's reservation given back to the job, due again at ``retry_at`` (one UPDATE)
    — unless the job changed since its reservation: then this was its run, failed."""
    if row.generation != run.generation or row.anchor_at != run.reserved_at:
        return job_outcome(conn, run, row, RunState.FAILED, now)
    state = jobs.retry(
        job_state(row),
        prev_anchor=run.prev_anchor_at,
        prev_last_fired=run.prev_last_fired_at,
        retry_at=retry_at,
    )
    outcome = detail[:255]
    values = job_state_values(state, now) | {"last_outcome": outcome}
    conn.execute(sql.UPDATE_JOB, {"p_job_id": row.id, **values})
    return job_view_of(row, state, outcome)
