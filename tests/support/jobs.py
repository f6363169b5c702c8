"""Cron jobs for tests: made as the surfaces make them, backdated instead of waiting."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from hbgw.core.clock import utcnow
from hbgw.sessions.grammar.job_schedule import exact_text, parse_job_schedule
from hbgw.sessions.models import JobRow
from hbgw.sessions.states import SETTLED, MissedPolicy
from hbgw.sessions.views import JobRoute, JobView, NewJob
from support.harness import Gateway, wait_until


def add_job(
    gw: Gateway,
    schedule: str,
    prompt: str = "report the weather",
    *,
    session: str | None = None,
    set_at: datetime | None = None,
    times: int | None = None,
    missed: MissedPolicy = MissedPolicy.COALESCE,
    model: str | None = None,
    tz: str | None = None,
) -> JobView:
    """A job as if added at ``set_at`` (backdated), with its entry in the due index."""
    at = set_at or utcnow()
    parsed = parse_job_schedule(schedule, now=at, min_interval=gw.settings.min_interval, tz=tz)
    route = JobRoute(session_id=session) if session else JobRoute(platform="slack", chat="CJ")
    # As the surfaces store it: HBGW_JITTER=false (the harness) marks a repeating job exact.
    text = exact_text(schedule, parsed, not gw.settings.jitter)
    job = gw.store.jobs.create_job(
        NewJob(parsed, text, prompt, route, model=model, times=times, missed_policy=missed),
        at,
    )
    gw.rt.due.settle_job(job.id)
    return job


def ago(seconds: float) -> datetime:
    return utcnow() - timedelta(seconds=seconds)


def job_runs(gw: Gateway, job_id: str, count: int = 1, timeout: float = 20.0) -> list[Any]:
    """The job's runs once ``count`` of them are settled."""

    def done() -> list[Any] | None:
        runs = [r for r in gw.store.jobs.job_runs(job_id) if r.state in SETTLED]
        return runs if len(runs) >= count else None

    return wait_until(done, timeout, f"{count} finished runs of job {job_id}")  # type: ignore[no-any-return]


def backdate_retry(gw: Gateway, job_id: str) -> datetime:
    """Move a job's retry (the ladder's next rung) into the past, SQL then the index: the
    retry is due now, without waiting out its delay. The retry time it had."""
    with Session(gw.store.engine) as db, db.begin():
        row = db.get(JobRow, job_id)
        assert row is not None and row.retry_at is not None, "the job has no retry pending"
        planned = row.retry_at
        row.retry_at = row.next_due_at = utcnow() - timedelta(seconds=1)
    gw.rt.due.settle_job(job_id)
    return planned
