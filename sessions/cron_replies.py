"""How a cron job reads in a chat: one line for lists and answers, a few for ``/cron show``."""

from __future__ import annotations

from hbgw.core.clock import iso
from hbgw.sessions.grammar.job_schedule import describe_job_schedule
from hbgw.sessions.store.job_records import JobView


def job_line(job: JobView) -> str:
    """``every 2h, next at 2027-01-05T09:00:00Z`` — or its state, when it will not run again."""
    schedule = describe_job_schedule(job.state.schedule)
    if job.next_due is not None:
        return f"{schedule}, next at {iso(job.next_due)}"
    return f"{schedule}, {job.status}"


def job_lines(job: JobView) -> list[str]:
    route = job.route
    target = (
        f"turns in session {route.session_id}"
        if route.session_id is not None
        else "a fresh conversation per run, delivered to this chat"
    )
    s = job.state
    runs = f"{s.fire_count} of {s.times}" if s.times is not None else str(s.fire_count)
    lines = [
        f"⏰ Cron job {job.id} — {job.status}",
        f"schedule: {job_line(job)}",
        f"prompt: {s.prompt}",
        f"target: {target}",
        f"runs so far: {runs}" + (f", last at {iso(s.last_fired)}" if s.last_fired else ""),
    ]
    if job.last_outcome:
        lines.append(f"last outcome: {job.last_outcome}")
    return lines
