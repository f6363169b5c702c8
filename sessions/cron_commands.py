"""The /cron commands at work: a parsed command applied to the store, answered in sentences.

A job added in a chat belongs to the session's owner and runs, each time, in a fresh session
delivered to this chat and thread — a standalone prompt, as the issue has it; a prompt that
needs the conversation is a /heartbeat. ``list`` shows the owner's jobs that reach this chat
(fresh sessions here, or turns in this session, as ``hbgw cron add --session`` makes them);
``show``, ``pause``, ``resume`` and ``cancel`` act on those only: any other id, another owner's
or another chat's, is "not in this chat", the same answer as an unknown one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hbgw.core.errors import NotFound
from hbgw.sessions.cron_replies import job_line, job_lines
from hbgw.sessions.grammar.cron_slash import (
    AddJob,
    CronCommand,
    CronHelp,
    JobVerb,
    ListJobs,
    cron_help,
    parse_cron_command,
)
from hbgw.sessions.grammar.limits import GrammarLimits
from hbgw.sessions.store import Jobs
from hbgw.sessions.store.job_records import JOB_PAGE, JobRoute, JobView, NewJob
from hbgw.sessions.store.session_records import SessionView


@dataclass(frozen=True)
class CronAnswer:
    text: str
    changed: str | None = None
    """The job whose state changed (the due index must learn it), if any."""


def handle_cron(
    jobs: Jobs,
    session: SessionView,
    text: str,
    now: datetime,
    limits: GrammarLimits,
) -> CronAnswer:
    """Parse and apply; grammar, state and quota errors (the store holds the session's owner
    to HBGW_API_MAX_JOBS_PER_OWNER) propagate as typed errors."""
    return apply_cron(jobs, session, parse_cron_command(text, now, limits), now)


def apply_cron(jobs: Jobs, session: SessionView, command: CronCommand, now: datetime) -> CronAnswer:
    if isinstance(command, CronHelp):
        return CronAnswer(cron_help())
    if isinstance(command, ListJobs):
        return CronAnswer(_list(jobs, session))
    if isinstance(command, AddJob):
        return _add(jobs, session, command, now)
    return _verb(jobs, session, command, now)


def chat_route(session: SessionView) -> JobRoute:
    """Where a job made in this chat delivers: a fresh session per run, on this chat."""
    return JobRoute(platform=session.platform, chat=session.chat, thread=session.thread)


def _add(jobs: Jobs, session: SessionView, command: AddJob, now: datetime) -> CronAnswer:
    new = NewJob(
        command.schedule, command.schedule_text, command.prompt, chat_route(session), session.owner
    )
    job = jobs.create_job(new, now)
    return CronAnswer(
        f"⏰ Cron job {job.id} added ({job_line(job)}): {job.state.prompt}\n"
        "Each run is a fresh conversation; its reply comes to this chat. "
        f"/cron cancel {job.id} stops it.",
        job.id,
    )


def _list(jobs: Jobs, session: SessionView) -> str:
    route = JobRoute(session.id, session.platform, session.chat, session.thread)
    found = [
        j
        for j in jobs.jobs(owner=session.owner, route=route, limit=JOB_PAGE)
        if j.owner == session.owner
    ]
    if not found:
        return (
            "No cron jobs deliver to this chat — add one: /cron add in 10m -- remind me to deploy."
        )
    more = len(found) == JOB_PAGE
    lines = [f"Cron jobs of this chat ({len(found)}{'+' if more else ''}):"]
    lines += [f"{j.id} {job_line(j)}: {j.state.prompt[:80]}" for j in found]
    if more:
        lines.append("… and more: hbgw cron list or GET /v1/cron pages through them all.")
    return "\n".join(lines)


def _verb(jobs: Jobs, session: SessionView, command: JobVerb, now: datetime) -> CronAnswer:
    job_id = command.job_id
    _here(jobs, session, job_id)
    if command.verb == "show":
        return CronAnswer("\n".join(job_lines(jobs.job(job_id))))
    change = {
        "pause": jobs.pause_job,
        "resume": jobs.resume_job,
        "cancel": jobs.cancel_job,
    }[command.verb]
    job = change(job_id, now, owner=session.owner)
    done = {"pause": "paused", "resume": "resumed", "cancel": "cancelled"}[command.verb]
    return CronAnswer(f"⏰ Cron job {job.id} {done} ({job_line(job)}).", job.id)


def _here(jobs: Jobs, session: SessionView, job_id: str) -> JobView:
    """The job, when it is the session owner's and delivers to this chat; else NotFound."""
    try:
        job = jobs.job(job_id, owner=session.owner)
    except NotFound:
        job = None
    route = job.route if job is not None else None
    ours = job is not None and job.owner == session.owner
    here = route is not None and (
        route.session_id == session.id
        or (route.platform, route.chat, route.thread)
        == (session.platform, session.chat, session.thread)
    )
    if job is None or not (ours and here):
        raise NotFound(f"There is no cron job {job_id} in this chat — /cron list shows its jobs.")
    return job
