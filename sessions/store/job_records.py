"""Cron jobs: add, list, show, pause, resume, cancel, their runs, and what restore reads.

A job's row carries its next due time (``next_due_at``), written by every change, so the index
and the restore pass read it without evaluating the schedule. Every change locks the row for its
read-then-write, like a heartbeat's (a reservation or refund of one of its runs waits for it).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, or_, select
from sqlalchemy.orm import Session

from hbgw.core.clock import iso
from hbgw.core.errors import BadInput, NotFound
from hbgw.sessions import jobs
from hbgw.sessions.grammar import CronSchedule, IntervalSchedule
from hbgw.sessions.grammar.job_schedule import (
    JobSchedule,
    OnceSchedule,
    describe_job_schedule,
    is_exact,
)
from hbgw.sessions.models import MODEL_CHARS, JobRow, RunRow
from hbgw.sessions.states import JobStatus, MissedPolicy
from hbgw.sessions.store.base import Transactions, active_session_row, transaction
from hbgw.sessions.store.deliveries import deliveries_of_runs
from hbgw.sessions.store.owner_quotas import check_job_room
from hbgw.sessions.store.run_views import RunView, run_view
from hbgw.sessions.validation import check_schedule_text, check_session_names, check_storable

JOB_PAGE = 100  # the jobs one list call answers; a cursor reads on


@dataclass(frozen=True)
class JobRoute:
    """Where a job's runs go: an existing ``session_id``, or a fresh session per run on this
    platform, chat and thread."""

    session_id: str | None = None
    platform: str | None = None
    chat: str | None = None
    thread: str | None = None


@dataclass(frozen=True)
class JobView:
    id: str
    owner: str | None
    schedule_text: str
    route: JobRoute
    model: str | None
    state: jobs.JobState
    next_due: datetime | None
    last_outcome: str | None
    created_at: datetime

    @property
    def status(self) -> JobStatus:
        return self.state.status

    def to_json(self) -> dict[str, Any]:
        s, schedule = self.state, self.state.schedule
        return {
            "id": self.id,
            "owner": self.owner,
            "status": s.status,
            "prompt": s.prompt,
            "schedule": describe_job_schedule(schedule),
            "schedule_text": self.schedule_text,
            "at": iso(schedule.at) if isinstance(schedule, OnceSchedule) else None,
            "interval_seconds": schedule.seconds
            if isinstance(schedule, IntervalSchedule)
            else None,
            "cron": schedule.expr if isinstance(schedule, CronSchedule) else None,
            "timezone": schedule.timezone if isinstance(schedule, CronSchedule) else None,
            "exact": not s.jitter_seed,
            "session_id": self.route.session_id,
            "platform": self.route.platform,
            "chat": self.route.chat,
            "thread": self.route.thread,
            "model": self.model,
            "times": s.times,
            "missed": s.missed_policy,
            "fire_count": s.fire_count,
            "next_due_at": iso(self.next_due),
            "last_fired_at": iso(s.last_fired),
            "last_outcome": self.last_outcome,
            "retries": s.retries,
            "retry_at": iso(s.retry_at),
            "created_at": iso(self.created_at),
        }


@dataclass(frozen=True)
class NewJob:
    schedule: JobSchedule
    schedule_text: str
    prompt: str
    route: JobRoute
    owner: str | None = None
    model: str | None = None
    times: int | None = None
    missed_policy: MissedPolicy = MissedPolicy.COALESCE


@dataclass(frozen=True)
class JobRestoreEntry:
    job_id: str
    next_due_at: datetime


@dataclass(frozen=True)
class JobPage:
    entries: list[JobRestoreEntry]
    rows: int
    last_id: str


class JobRecords(Transactions):
    @transaction
    def create_job(self, new: NewJob, now: datetime) -> JobView:
        """Check everything first: a refused job stores nothing."""
        _check_new(new)
        state = jobs.new_job(
            schedule=new.schedule,
            prompt=new.prompt,
            times=new.times,
            missed_policy=new.missed_policy,
            now=now,
        )
        job_id = "j" + uuid.uuid4().hex[:11]
        state = dataclasses.replace(state, jitter_seed=_seed(job_id, new.schedule_text))
        with self._transaction() as db:
            if new.route.session_id is not None:
                active_session_row(db, new.route.session_id, "schedule a job in")
            check_job_room(db, self.quotas, new.owner)
            row = JobRow(
                id=job_id,
                owner=new.owner,
                schedule_text=new.schedule_text,
                session_id=new.route.session_id,
                platform=new.route.platform,
                chat=new.route.chat,
                thread=new.route.thread,
                model=new.model,
                created_at=now,
            )
            apply_job_state(row, state, now)
            db.add(row)
            db.flush()
            return job_view(row)

    @transaction
    def job(self, job_id: str, *, owner: str | None = None) -> JobView:
        with self._transaction() as db:
            return job_view(job_row(db, job_id, owner=owner))

    @transaction
    def jobs(
        self,
        *,
        owner: str | None = None,
        limit: int = JOB_PAGE,
        after: str | None = None,
        route: JobRoute | None = None,
    ) -> list[JobView]:
        """One page of jobs, oldest first: those made after job ``after`` (the cursor: the last
        id of the page before), ``owner``'s only when given, delivering to ``route`` (its
        session, or its platform, chat and thread) when given."""
        query = select(JobRow).order_by(JobRow.created_at, JobRow.id).limit(limit)
        if owner is not None:
            query = query.where(JobRow.owner == owner)
        if route is not None:
            query = query.where(_delivers_to(route))
        with self._transaction() as db:
            if after is not None:
                cursor = db.get(JobRow, after)
                if cursor is None:
                    raise BadInput(f"after={after!r} is not a job id — give a page's last id.")
                query = query.where(
                    or_(
                        JobRow.created_at > cursor.created_at,
                        and_(JobRow.created_at == cursor.created_at, JobRow.id > cursor.id),
                    )
                )
            return [job_view(r) for r in db.scalars(query)]

    @transaction
    def pause_job(self, job_id: str, now: datetime, *, owner: str | None = None) -> JobView:
        return self._change_job(job_id, jobs.pause, now, owner)

    @transaction
    def resume_job(self, job_id: str, now: datetime, *, owner: str | None = None) -> JobView:
        return self._change_job(job_id, jobs.resume, now, owner)

    @transaction
    def cancel_job(self, job_id: str, now: datetime, *, owner: str | None = None) -> JobView:
        """Cancelling a cancelled job says so (``InvalidState``), not "not found"."""
        return self._change_job(job_id, jobs.cancel, now, owner)

    @transaction
    def job_runs(self, job_id: str, *, owner: str | None = None, limit: int = 100) -> list[RunView]:
        """The job's newest ``limit`` runs, oldest first, each with its delivery record."""
        with self._transaction() as db:
            job_row(db, job_id, owner=owner)
            query = select(RunRow).where(RunRow.job_id == job_id).order_by(RunRow.id.desc())
            rows = list(db.scalars(query.limit(limit)))
            views = [run_view(r) for r in reversed(rows)]
            found = deliveries_of_runs(db, [r.id for r in views])
            return [dataclasses.replace(r, delivery=found.get(r.id)) for r in views]

    @transaction
    def restorable_jobs_page(self, after: str, limit: int) -> JobPage:
        """Active jobs with an id above ``after`` and a due time, by id (keyset)."""
        with self._transaction() as db:
            rows = db.execute(
                select(JobRow.id, JobRow.next_due_at)
                .where(JobRow.status == JobStatus.ACTIVE, JobRow.id > after)
                .order_by(JobRow.id)
                .limit(limit)
            ).all()
        entries = [JobRestoreEntry(jid, due) for jid, due in rows if due is not None]
        return JobPage(entries, len(rows), rows[-1][0] if rows else "")

    def _change_job(
        self, job_id: str, transition: Any, now: datetime, owner: str | None
    ) -> JobView:
        with self._transaction() as db:
            row = job_row(db, job_id, owner=owner, for_update=True)
            apply_job_state(row, transition(job_state(row), job_id, now), now)
            return job_view(row)


def _delivers_to(route: JobRoute) -> ColumnElement[bool]:
    """Jobs whose runs reach ``route``: turns in its session, or fresh sessions on its chat."""
    thread = JobRow.thread.is_(None) if route.thread is None else JobRow.thread == route.thread
    here = and_(JobRow.platform == route.platform, JobRow.chat == route.chat, thread)
    return here if route.session_id is None else or_(JobRow.session_id == route.session_id, here)


def _check_new(new: NewJob) -> None:
    check_storable(new.prompt, "prompt")
    cron = new.schedule.expr if isinstance(new.schedule, CronSchedule) else None
    check_schedule_text(new.schedule_text, cron)
    if new.model is not None:
        check_storable(new.model, "model")
        if not new.model.strip() or len(new.model) > MODEL_CHARS:
            raise BadInput(f"A model name is 1 to {MODEL_CHARS} characters.")
    route = new.route
    if route.session_id is None:
        if route.platform is None or route.chat is None:
            raise BadInput(
                "A job needs a target — an existing session (--session SID) or a route for a "
                "fresh session per run (--platform and --chat, optionally --thread)."
            )
        check_session_names(
            platform=route.platform, chat=route.chat, thread=route.thread, owner=new.owner
        )
    elif route.platform is not None or route.chat is not None or route.thread is not None:
        raise BadInput("Give a job one target — --session, or a route (--platform/--chat).")


def job_row(
    db: Session, job_id: str, *, owner: str | None = None, for_update: bool = False
) -> JobRow:
    query = select(JobRow).where(JobRow.id == job_id)
    if for_update:
        query = query.with_for_update()
    row = db.scalars(query).first()
    # Another owner's job is not shown to exist: the same answer as an unknown id.
    if row is None or (owner is not None and row.owner != owner):
        raise NotFound(f"There is no cron job {job_id!r} — `hbgw cron list` shows the jobs.")
    return row


def job_state(row: JobRow | Row[Any]) -> jobs.JobState:
    return jobs.JobState(
        prompt=row.prompt,
        schedule=schedule_of(row),
        status=row.status,
        anchor=row.anchor_at,
        fire_count=row.fire_count,
        times=row.times,
        generation=row.generation,
        missed_policy=row.missed_policy,
        last_fired=row.last_fired_at,
        retries=row.retries or 0,
        retry_at=row.retry_at,
        jitter_seed=_seed(row.id, row.schedule_text),
    )


def _seed(job_id: str, schedule_text: str) -> str:
    """Jittered by its id unless its schedule text ends with ``exact``."""
    return "" if is_exact(schedule_text) else job_id


def schedule_of(row: JobRow | Row[Any]) -> JobSchedule:
    if row.run_at is not None:
        return OnceSchedule(row.run_at)
    if row.cron is not None:
        return CronSchedule(expr=row.cron, timezone=row.timezone or "UTC")
    assert row.interval_seconds is not None  # every job row has one of the three
    return IntervalSchedule(row.interval_seconds)


def apply_job_state(row: JobRow, state: jobs.JobState, now: datetime) -> None:
    for name, value in job_state_values(state, now).items():
        setattr(row, name, value)


def job_state_values(state: jobs.JobState, now: datetime) -> dict[str, Any]:
    """A job row's columns for ``state`` (an ORM row's, or ``job_sql.UPDATE_JOB``'s)."""
    schedule = state.schedule
    return {
        "prompt": state.prompt,
        "run_at": schedule.at if isinstance(schedule, OnceSchedule) else None,
        "interval_seconds": schedule.seconds if isinstance(schedule, IntervalSchedule) else None,
        "cron": schedule.expr if isinstance(schedule, CronSchedule) else None,
        "timezone": schedule.timezone if isinstance(schedule, CronSchedule) else None,
        "status": state.status,
        "anchor_at": state.anchor,
        "fire_count": state.fire_count,
        "times": state.times,
        "generation": state.generation,
        "missed_policy": state.missed_policy,
        "last_fired_at": state.last_fired,
        "retries": state.retries,
        "retry_at": state.retry_at,
        "next_due_at": state.next_due(),
        "updated_at": now,
    }


def job_view(row: JobRow | Row[Any]) -> JobView:
    """The job as a view, from its ORM row or a Core row (the same column names)."""
    return job_view_of(row, job_state(row), row.last_outcome)


def job_view_of(row: JobRow | Row[Any], state: jobs.JobState, last_outcome: str | None) -> JobView:
    """The job of ``row`` as it is once ``state`` and ``last_outcome`` are written (the fire
    path's UPDATE wrote them: no read again)."""
    route = JobRoute(row.session_id, row.platform, row.chat, row.thread)
    return JobView(
        id=row.id,
        owner=row.owner,
        schedule_text=row.schedule_text,
        route=route,
        model=row.model,
        state=state,
        next_due=state.next_due(),
        last_outcome=last_outcome,
        created_at=row.created_at,
    )
