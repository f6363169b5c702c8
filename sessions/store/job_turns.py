"""A cron job's fire path in SQL, step for step the heartbeat's (``fire_turns.py``): admission
(one read for a batch), the claim of the grant's fence with the reservation, the fenced re-check
and start, then ``mark_delivering`` (``ledger.py``, shared) and the fenced finish. Each step
answers the job's next due time, which the worker writes to the index under ``job:<id>``.

A job with a route runs each time in a fresh session, whose id comes from the fire id: a fire
delivered twice finds the session its first delivery made, and the ledger's UNIQUE fire id does
the rest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from hbgw.core.errors import NotFound
from hbgw.core.usage import TokenUsage
from hbgw.sessions import jobs
from hbgw.sessions.models import JobRow, RunRow, SessionRow
from hbgw.sessions.states import JobStatus, RefundReason, RunState, SessionStatus
from hbgw.sessions.store.base import Transactions, fenced_session_row, run_row, transaction
from hbgw.sessions.store.deliveries import DeliveryOutcome
from hbgw.sessions.store.fire_rows import (
    DEPARTED,
    add_message,
    history_before,
    prompt_of,
    record_delivery,
)
from hbgw.sessions.store.job_records import JobView, apply_job_state, job_row, job_state, job_view
from hbgw.sessions.store.job_steps import job_outcome_in, reserve_job_in
from hbgw.sessions.store.ledger_steps import (
    claim_in,
    end_run,
    finish_in,
    finished_outcome,
    refund_in,
    refund_reason,
    start_in,
)
from hbgw.sessions.store.message_records import MessageView
from hbgw.sessions.store.reservations import run_by_fire_id
from hbgw.sessions.store.run_views import ReserveOutcome, RunKey, RunView, run_view
from hbgw.sessions.store.session_records import SessionView, resolve_active_row, session_view


@dataclass(frozen=True)
class JobAdmission:
    """What admission decides from: the job, its target session when it names one (compression
    followed), and the ledger's run of this fire id (a duplicate delivery)."""

    job: JobView
    session: SessionView | None
    existing: RunView | None


@dataclass(frozen=True)
class JobClaim:
    outcome: ReserveOutcome
    job: JobView
    unknown: int = 0


@dataclass(frozen=True)
class JobStarted:
    run: RunView
    job: JobView
    message: MessageView
    history: list[MessageView]


@dataclass(frozen=True)
class JobNotStarted:
    reason: RefundReason
    run: RunView
    job: JobView


@dataclass(frozen=True)
class JobFinished:
    run: RunView
    job: JobView


def run_session_id(fire_id: str) -> str:
    """The fresh session of one run of a routed job: like any session id, derived from the fire."""
    return "s" + hashlib.sha256(fire_id.encode()).hexdigest()[:15]


class JobTurns(Transactions):
    @transaction
    def admit_jobs(self, fires: Sequence[tuple[str, str]]) -> list[JobAdmission | None]:
        """For each (job id, fire id): the job, its target session, the ledger's run of the
        fire; None for a job that does not exist. One read-only transaction for the batch."""
        with self._transaction() as db:
            return [_job_admission_in(db, job_id, fid) for job_id, fid in fires]

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

    @transaction
    def run_session(self, job_id: str, fire_id: str, now: datetime) -> SessionView:
        """The fresh session of this run of a routed job, made by the first call."""
        sid = run_session_id(fire_id)
        try:
            return self._run_session(job_id, sid, now)
        except IntegrityError:
            return self._run_session(job_id, sid, now)  # made meanwhile by a second delivery

    def _run_session(self, job_id: str, sid: str, now: datetime) -> SessionView:
        with self._transaction() as db:
            found = db.get(SessionRow, sid)
            if found is not None:
                return session_view(found)
            job = job_row(db, job_id)
            assert job.platform is not None and job.chat is not None  # a routed job
            row = SessionRow(
                id=sid,
                platform=job.platform,
                chat=job.chat,
                thread=job.thread,
                owner=job.owner,
                status=SessionStatus.ACTIVE,
                conversation=1,
                fence=0,
                created_at=now,
                updated_at=now,
            )
            db.add(row)
            db.flush()
            return session_view(row)

    @transaction
    def claim_job_fire(
        self,
        session_id: str,
        fence: int,
        job_id: str,
        fire_id: str,
        due_ms: int,
        now: datetime,
        *,
        worker: str | None = None,
        deferred: bool = False,
    ) -> JobClaim:
        """Claim the grant's fence and reserve one run of the job, in one transaction."""
        args = (session_id, fence, job_id, fire_id, due_ms, now, worker, deferred)
        try:
            return self._claim_job_fire(*args)
        except IntegrityError:
            return self._claim_job_fire(*args)  # a concurrent reserve won the fire id

    def _claim_job_fire(
        self,
        session_id: str,
        fence: int,
        job_id: str,
        fire_id: str,
        due_ms: int,
        now: datetime,
        worker: str | None,
        deferred: bool,
    ) -> JobClaim:
        with self._transaction() as db:
            claimed = claim_in(db, session_id, fence, now)
            row = job_row(db, job_id, for_update=True)
            outcome = reserve_job_in(
                db, claimed.session, row, fire_id, due_ms, fence, now, worker, deferred
            )
            return JobClaim(outcome, job_view(row), claimed.unknown)

    @transaction(repeatable=True)
    def start_job_fire(
        self,
        run_key: RunKey,
        fence: int,
        now: datetime,
        *,
        conversation: int,
        owner_changed: bool,
        prompt: str,
        history: int,
    ) -> JobStarted | JobNotStarted:
        """The fenced re-check after a reservation, then the start with ``prompt`` stored."""
        with self._transaction() as db:
            run = run_row(db, run_key)
            session = fenced_session_row(db, run.session_id, fence)
            assert run.job_id is not None
            row = job_row(db, run.job_id, for_update=True)
            if run.state == RunState.STARTED and run.fence == fence:
                # A repeat after a COMMIT whose answer was lost.
                message = prompt_of(db, run.fire_id, run.started_at)
                return JobStarted(
                    run_view(run), job_view(row), message, history_before(db, message, history)
                )
            reason = _job_refusal(session, row, run, conversation, owner_changed)
            if reason is not None:
                if run.state == RunState.RESERVED:
                    refund_in(db, run, reason, now)
                return JobNotStarted(reason, run_view(run), job_view(row))
            start_in(run, now)
            message = add_message(
                db, session.id, session.conversation, run.fire_id, "user", "heartbeat", prompt, now
            )
            return JobStarted(
                run_view(run), job_view(row), message, history_before(db, message, history)
            )

    @transaction
    def refund_job_fire(
        self, run_key: RunKey, reason: RefundReason, now: datetime
    ) -> JobNotStarted:
        why = refund_reason(reason)
        with self._transaction() as db:
            run = run_row(db, run_key)
            refund_in(db, run, why, now)
            assert run.job_id is not None
            return JobNotStarted(why, run_view(run), job_view(job_row(db, run.job_id)))

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
            run = run_row(db, run_key)
            session = fenced_session_row(db, run.session_id, fence)
            if run.state != final:
                if delivered is not None:
                    record_delivery(db, run, fence, channel, delivered, now)
                finish_in(db, run, final, now, detail, usage)
                add_message(
                    db,
                    session.id,
                    session.conversation,
                    run.fire_id,
                    "assistant",
                    reply_kind,
                    reply,
                    now,
                )
            assert run.job_id is not None
            return JobFinished(run_view(run), job_view(job_row(db, run.job_id)))

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
            run = run_row(db, run_key)
            session = fenced_session_row(db, run.session_id, fence)
            assert run.job_id is not None
            row = job_row(db, run.job_id, for_update=True)
            if run.state != RunState.FAILED:
                end_run(run, RunState.FAILED, now, detail, usage)
                add_message(
                    db,
                    session.id,
                    session.conversation,
                    run.fire_id,
                    "assistant",
                    "notice",
                    notice,
                    now,
                )
                if row.generation == run.generation and row.anchor_at == run.reserved_at:
                    state = jobs.retry(
                        job_state(row),
                        prev_anchor=run.prev_anchor_at,
                        prev_last_fired=run.prev_last_fired_at,
                        retry_at=retry_at,
                    )
                    apply_job_state(row, state, now)
                    row.last_outcome = detail[:255]
                else:
                    job_outcome_in(db, run, RunState.FAILED, now)
            return JobFinished(run_view(run), job_view(row))


def _job_refusal(
    session: SessionRow, row: JobRow, run: RunRow, conversation: int, owner_changed: bool
) -> RefundReason | None:
    if session.status == SessionStatus.SUSPENDED:
        return RefundReason.SESSION_SUSPENDED
    if session.status != SessionStatus.ACTIVE:
        return DEPARTED.get(session.closed_reason or "", RefundReason.SESSION_CLOSED)
    if session.conversation != conversation:
        return RefundReason.SESSION_RESET
    if row.generation != run.generation or row.status != JobStatus.ACTIVE:
        return RefundReason.JOB_CHANGED
    return RefundReason.OWNER_CHANGED if owner_changed else None


def _job_admission_in(db: Session, job_id: str, fire_id: str) -> JobAdmission | None:
    row = db.scalars(select(JobRow).where(JobRow.id == job_id)).first()
    if row is None:
        return None
    session = None
    if row.session_id is not None:
        try:
            session = session_view(resolve_active_row(db, row.session_id))
        except NotFound:
            session = None
    existing = run_by_fire_id(db, fire_id)
    return JobAdmission(job_view(row), session, run_view(existing) if existing else None)
