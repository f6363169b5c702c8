"""A cron job's fire path in SQL, step for step the heartbeat's (``fire_turns.py``): admission
(one read for a batch), ``begin_job_fire`` (the grant's fence claimed, the run reserved, re-checked
and started — or given back at once — in one transaction), then ``mark_delivering``
(``ledger.py``, shared) and the fenced finish. Each step answers the job's next due time, which
the worker writes to the index under ``job:<id>``. The steps run named Core statements
(``job_rows.py``: ``job_sql.py``'s and ``ledger_sql.py``'s): no ORM object on a run that goes as
planned.

A job with a route runs each time in a fresh session, whose id comes from the fire id: admission
computes it (no SQL: ownership needs only the id), and the run's begin makes the session, in its
one transaction, before the claim; a fire delivered twice finds the session its first delivery
made, and the ledger's UNIQUE fire id does the rest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from hbgw.core.errors import StaleFence
from hbgw.core.usage import TokenUsage
from hbgw.sessions import jobs
from hbgw.sessions.states import (
    ClosedReason,
    JobStatus,
    RefundReason,
    RunState,
    SessionStatus,
    fire_day,
)
from hbgw.sessions.store import fire_rows as rows
from hbgw.sessions.store import job_rows, ledger_sql
from hbgw.sessions.store import job_sql as sql
from hbgw.sessions.store.base import Transactions, transaction
from hbgw.sessions.store.deliveries import DeliveryOutcome
from hbgw.sessions.store.job_records import JobView, apply_job_state, job_row, job_state, job_view
from hbgw.sessions.store.job_rows import JobNotStarted, JobStarted
from hbgw.sessions.store.ledger_steps import finished_outcome
from hbgw.sessions.store.reservations import reserved_values
from hbgw.sessions.store.run_views import Duplicate, Refused, RunKey, RunView, run_view
from hbgw.sessions.store.session_records import SessionView, resolve_active_row, session_view

__all__ = ["JobAdmission", "JobBegin", "JobFinished", "JobNotStarted", "JobStart", "JobStarted"]


@dataclass(frozen=True)
class JobAdmission:
    """What admission decides from: the job, its target session when it names one (compression
    followed), and the ledger's run of this fire id (a duplicate delivery)."""

    job: JobView
    session: SessionView | None
    existing: RunView | None

    def target(self, fire_id: str, now: datetime) -> SessionView | None:
        """The session this fire's run goes to: the job's, as read (None: gone), or a routed
        job's fresh one, as the run's begin makes it — nothing to read."""
        if self.job.route.session_id is not None:
            return self.session
        return run_session(self.job, fire_id, now)


@dataclass(frozen=True)
class JobStart:
    """What a job's turn brings to its begin: ``conversation``, the session's when the fire was
    admitted; ``refusal``, what Redis read with the lock (lock lost, emergency stop, owner
    changed), weighed after SQL's own reasons; ``prompt``, the turn's message written from the
    job the reservation reads; ``history``, how many messages before it the agent sees."""

    conversation: int
    prompt: Callable[[JobView], str]
    history: int
    refusal: RefundReason | None = None
    worker: str | None = None
    deferred: bool = False


@dataclass(frozen=True)
class JobBegin:
    """The fence is claimed; ``outcome``: the run started, reserved and given back in the same
    transaction (the re-check refused it), the fire already in the ledger, or nothing reserved;
    ``job``: the job after it (None: it is gone), whose next due time the index gets;
    ``unknown``: deliveries of older turns the claim found cut off."""

    outcome: JobStarted | JobNotStarted | Duplicate | Refused
    job: JobView | None
    unknown: int = 0


@dataclass(frozen=True)
class JobFinished:
    run: RunView
    job: JobView


def run_session_id(fire_id: str) -> str:
    """The fresh session of one run of a routed job: like any session id, derived from the fire."""
    return "s" + hashlib.sha256(fire_id.encode()).hexdigest()[:15]


def run_session(job: JobView, fire_id: str, now: datetime) -> SessionView:
    """A routed job's fresh session for this fire, as its begin makes it (``job_sql.RUN_SESSION``:
    the job's route and owner, active, conversation 1); made ``now`` only in this view."""
    route = job.route
    assert route.platform is not None and route.chat is not None  # a routed job
    return SessionView(
        id=run_session_id(fire_id), platform=route.platform, chat=route.chat,
        thread=route.thread, owner=job.owner, status=SessionStatus.ACTIVE, closed_reason=None,
        parent_id=None, conversation=1, fence=0, created_at=now,
    )  # fmt: skip


class JobTurns(Transactions):
    @transaction
    def admit_jobs(self, fires: Sequence[tuple[str, str]]) -> list[JobAdmission | None]:
        """For each (job id, fire id): the job, its target session, the ledger's run of the
        fire; None for a job that does not exist. One read-only transaction for the batch."""
        if not fires:
            return []
        with self._transaction() as db:
            return _job_admissions_in(db, fires)

    @transaction
    def skip_missed_job(self, job_id: str, generation: int, now: datetime) -> JobView:
        """``MissedPolicy.SKIP``: the missed due times never run; due next after now."""
        with self._transaction() as db:
            row = job_row(db, job_id, for_update=True)
            state = job_state(row)
            if row.generation == generation and state.is_due(now):
                apply_job_state(row, jobs.skip_missed(state, now), now)
                row.last_outcome = "skipped missed runs"
            return job_view(row)

    @transaction
    def hold_job(self, job_id: str, why: str, now: datetime) -> JobView:
        """The job's session can run nothing any more (closed, suspended): paused, saying why."""
        with self._transaction() as db:
            row = job_row(db, job_id, for_update=True)
            state = job_state(row)
            if state.status == JobStatus.ACTIVE:
                apply_job_state(row, jobs.pause(state, job_id, now), now)
                row.last_outcome = why[:255]
            return job_view(row)

    @transaction(repeatable=True)
    def begin_job_fire(
        self,
        session_id: str,
        fence: int,
        job_id: str,
        fire_id: str,
        due_ms: int,
        now: datetime,
        start: JobStart,
    ) -> JobBegin:
        """The lock was granted: claim its fence, reserve one run of the job, re-check it and
        start it (or give it back at once), in one transaction, as ``begin_fire``; a routed
        job's run makes its fresh session first. StaleFence does nothing, unless this is a
        repeat after its own COMMIT was cut off: then it answers what that COMMIT stored."""
        args = (session_id, fence, job_id, fire_id, due_ms, now, start)
        try:
            return self._begin_job_fire(*args)
        except IntegrityError:
            return self._begin_job_fire(*args)  # a concurrent reserve won the fire id

    def _begin_job_fire(
        self,
        session_id: str,
        fence: int,
        job_id: str,
        fire_id: str,
        due_ms: int,
        now: datetime,
        start: JobStart,
    ) -> JobBegin:
        with self._transaction() as db:
            if session_id == run_session_id(fire_id):  # a routed job's run, in its own session
                job_rows.make_run_session(rows.on(db, writes=True), session_id, job_id, now)
            try:
                session, unknown = rows.claim(db, session_id, fence, now)
            except StaleFence:
                again = job_rows.begun_before(db, session_id, fence, fire_id, start.history)
                if again is None:
                    raise
                return JobBegin(again, again.job)
            conn = rows.on(db, writes=True)
            row = job_rows.job_for_update(conn, job_id)
            job = job_view(row) if row is not None else None
            admitted = job_rows.reserving_job(conn, session, fire_id, row, now)
            if not isinstance(admitted, jobs.JobState):  # a duplicate, or refused
                return JobBegin(admitted, job, unknown)
            assert row is not None and job is not None  # reserving_job refused otherwise
            values = reserved_values(
                fire_id, session.id, admitted, fence=fence, due_ms=due_ms, now=now,
                worker=start.worker, deferred=start.deferred, job_id=row.id,
            )  # fmt: skip
            reason = _refusal(session, start)
            if reason is not None:
                refused = job_rows.refunded_at_once(conn, values, row, admitted, reason, now)
                return JobBegin(refused, refused.job, unknown)
            started = job_rows.start(
                db, session, values, row, admitted, start.prompt(job), start.history, now
            )
            return JobBegin(started, started.job, unknown)

    @transaction(repeatable=True)
    def finish_job_fire(
        self,
        run_key: RunKey,
        outcome: RunState,
        fence: int,
        now: datetime,
        *,
        reply: str,
        reply_kind: str,
        detail: str | None = None,
        usage: TokenUsage | None = None,
        delivered: DeliveryOutcome | None = None,
        channel: str = "",
    ) -> JobFinished:
        """As ``finish_fire``: the outcome, usage, reply and delivery, fenced; and the job's
        state after it (completed when that was its last run)."""
        final = finished_outcome(outcome)
        with self._transaction() as db:
            conn = rows.on(db, writes=True)
            run = rows.run_with_fence(conn, run_key, fence)
            row = job_rows.job_for_update(conn, run.job_id)
            assert row is not None  # a job's row is never deleted (cancelled: kept for audit)
            if run.state == final:  # a repeat after a COMMIT whose answer was lost (reply too)
                return JobFinished(rows.run_view_of(run), job_view(row))
            if delivered is not None:
                rows.record_delivery(db, run, fence, channel, delivered, now)
            view = rows.finish(conn, run, final, now, detail, usage)
            job = job_rows.job_outcome(conn, run, row, final, now)
            rows.add_message(
                db, run.session_id, run.session_conversation, run.fire_id, "assistant",
                reply_kind, reply, now,
            )  # fmt: skip
            return JobFinished(view, job)

    @transaction(repeatable=True)
    def retry_job_fire(
        self,
        run_key: RunKey,
        fence: int,
        now: datetime,
        *,
        detail: str,
        notice: str,
        usage: TokenUsage | None,
        retry_at: datetime,
    ) -> JobFinished:
        """The run's model was unreachable: the run is recorded failed (its tokens too), the
        notice stored in its session, and its reservation given back to the job, due again at
        ``retry_at`` — unless the job changed since (then this was its run, failed)."""
        with self._transaction() as db:
            conn = rows.on(db, writes=True)
            run = rows.run_with_fence(conn, run_key, fence)
            row = job_rows.job_for_update(conn, run.job_id)
            assert row is not None  # a job's row is never deleted (cancelled: kept for audit)
            if run.state == RunState.FAILED:  # a repeat after a COMMIT whose answer was lost
                return JobFinished(rows.run_view_of(run), job_view(row))
            view = rows.finish(conn, run, RunState.FAILED, now, detail, usage)
            job = job_rows.retried(conn, run, row, detail, retry_at, now)
            rows.add_message(
                db, run.session_id, run.session_conversation, run.fire_id, "assistant",
                "notice", notice, now,
            )  # fmt: skip
            return JobFinished(view, job)


def _refusal(session: Any, start: JobStart) -> RefundReason | None:
    """The re-check, after the reservation found the session active and the job due: the
    session reset since admission, then what Redis read with the lock."""
    if session.conversation != start.conversation:
        return RefundReason.SESSION_RESET
    return start.refusal


def _job_admissions_in(db: Session, fires: Sequence[tuple[str, str]]) -> list[JobAdmission | None]:
    """The batch's jobs, their sessions and the runs of their fire ids, one statement each; a
    compressed session is followed to its active child one at a time (rare)."""
    conn = rows.on(db, writes=False)
    job_ids = sorted({job_id for job_id, _ in fires})
    found = rows.by_key(conn.execute(sql.JOBS_BY_ID, {"p_ids": job_ids}).all(), "id")
    sids = sorted({r.session_id for r in found.values() if r.session_id is not None})
    sessions = rows.by_key(conn.execute(ledger_sql.SESSIONS_BY_ID, {"p_ids": sids}).all(), "id")
    fire_ids = sorted({fid for _, fid in fires})
    days = sorted({fire_day(fid) for fid in fire_ids})
    params = {"p_ids": fire_ids, "p_days": days}
    runs = rows.by_key(conn.execute(ledger_sql.RUNS_BY_FIRE_ID, params).all(), "fire_id")
    admissions: list[JobAdmission | None] = []
    for job_id, fid in fires:
        row = found.get(job_id)
        if row is None:
            admissions.append(None)
            continue
        session = _active(db, sessions.get(row.session_id)) if row.session_id else None
        existing = runs.get(fid)
        run = run_view(existing) if existing is not None else None
        admissions.append(JobAdmission(job_view(row), session, run))
    return admissions


def _active(db: Session, row: Any) -> SessionView | None:
    """The job's session as admission sees it: followed to its active child when compressed."""
    if row is None:
        return None
    if row.status == SessionStatus.CLOSED and row.closed_reason == ClosedReason.COMPRESSED:
        return session_view(resolve_active_row(db, row.id))
    return session_view(row)
