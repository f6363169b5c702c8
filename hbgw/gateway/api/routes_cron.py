"""Cron jobs, owner-scoped like sessions: add, list, show, pause, resume, cancel, runs.

A job is read by the grammar of ``hbgw cron add`` (the same sentences, ``422``); another
owner's job answers like a missing one (``404``); a change that does not fit the job's state
(pausing a paused job, cancelling a cancelled one) is ``409`` with a sentence that says so; an
owner at HBGW_API_MAX_JOBS_PER_OWNER jobs (active or paused) gets ``429`` for another.
Every change reaches the due index like the CLI's (``DueSettle.settle_job``).
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from fastapi import APIRouter, Query

from hbgw.core.errors import BadInput
from hbgw.gateway.api.auth import Principal
from hbgw.gateway.api.context import ApiContext
from hbgw.gateway.api.errors import ApiError
from hbgw.gateway.api.routes_sessions import PAGE_MAX, Ctx, Who
from hbgw.gateway.api.schemas import JobSpec, errors
from hbgw.gateway.api.serial import run_json
from hbgw.sessions.grammar import check_prompt
from hbgw.sessions.grammar.job_schedule import exact_text, parse_job_schedule
from hbgw.sessions.states import MissedPolicy
from hbgw.sessions.validation import check_storable
from hbgw.sessions.views import JobRoute, JobView, NewJob
from hbgw.state.connection import TRANSIENT_REDIS_ERRORS

router = APIRouter(prefix="/v1/cron", tags=["cron"])


def _owner(who: Principal) -> str | None:
    """Whose jobs a request sees: an operator every one (None), an owner their own."""
    return None if who.admin else who.owner


def _settled(ctx: ApiContext, job: JobView) -> dict[str, Any]:
    if ctx.rt is not None:
        with contextlib.suppress(*TRANSIENT_REDIS_ERRORS):  # else the restore pass writes it
            ctx.rt.due.settle_job(job.id)
    return job.to_json()


@router.post("", status_code=201, responses=errors(403, 404, 409, 422, 429))
def add(body: JobSpec, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Add a job; nothing is stored when any part is refused."""
    now = ctx.clock()
    text = " ".join(body.schedule.split())
    schedule = parse_job_schedule(text, now=now, min_interval=ctx.limits.min_interval, tz=body.tz)
    prompt = check_prompt(body.prompt, ctx.limits, example='"prompt": "remind me"')
    if body.missed not in {p.value for p in MissedPolicy}:
        raise BadInput(f"missed is coalesce or skip, not {body.missed!r}.")
    if body.session_id is not None:
        ctx.session_for(who, body.session_id)  # a stranger's session answers 404
    elif body.platform is not None:
        ctx.served.check(body.platform)  # no job for a route nobody delivers to
        if body.chat is not None:  # without one, create_job says a route needs its chat
            # Each run is a fresh session on the route: the same right as opening one there.
            ctx.check_chat(who, body.platform, body.chat)
        if body.platform == "webhook" and not who.admin:
            # A run's fresh session has no URL of its own: it would post to HBGW_WEBHOOK_URL.
            raise ApiError(
                403,
                "forbidden",
                "A routed webhook job posts each run to the operator's HBGW_WEBHOOK_URL; an "
                "owner's job runs in its own webhook session instead (session_id).",
            )
    route = JobRoute(body.session_id, body.platform, body.chat, body.thread)
    text = exact_text(text, schedule, body.exact or not ctx.limits.jitter)
    new = NewJob(
        schedule, text, prompt, route, who.owner, body.model, body.times, MissedPolicy(body.missed)
    )
    return _settled(ctx, ctx.store_for(who).jobs.create_job(new, now))


@router.get("", responses=errors(422))
def list_jobs(
    ctx: Ctx,
    who: Who,
    after: Annotated[str | None, Query(max_length=255)] = None,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 50,
) -> dict[str, Any]:
    """The jobs this token sees, oldest first, paged: ``next_after`` (the page's last id) is
    where the next page starts, null on the last page."""
    if after is not None:
        check_storable(after, "after")
    jobs = ctx.store.jobs.jobs(owner=_owner(who), after=after, limit=limit)
    next_after = jobs[-1].id if len(jobs) == limit else None
    return {"jobs": [j.to_json() for j in jobs], "next_after": next_after}


@router.get("/{job_id}", responses=errors(404))
def show(job_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    return ctx.store.jobs.job(job_id, owner=_owner(who)).to_json()


@router.post("/{job_id}/pause", responses=errors(404, 409))
def pause(job_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Stop running it but keep it."""
    return _settled(ctx, ctx.store.jobs.pause_job(job_id, ctx.clock(), owner=_owner(who)))


@router.post("/{job_id}/resume", responses=errors(404, 409))
def resume(job_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Run it again, re-anchored now (no catch-up for the paused time)."""
    return _settled(ctx, ctx.store.jobs.resume_job(job_id, ctx.clock(), owner=_owner(who)))


@router.post("/{job_id}/cancel", responses=errors(404, 409))
def cancel(job_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """End it for good; a second cancel is 409 "already cancelled"."""
    return _settled(ctx, ctx.store.jobs.cancel_job(job_id, ctx.clock(), owner=_owner(who)))


@router.delete("/{job_id}", responses=errors(404, 409))
def delete(job_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """The same as ``POST /v1/cron/{id}/cancel`` (kept as cancelled for audit)."""
    return cancel(job_id, ctx, who)


@router.get("/{job_id}/runs", responses=errors(404))
def runs(job_id: str, ctx: Ctx, who: Who) -> list[dict[str, Any]]:
    """The job's runs in the ledger, oldest first: state, session, tokens, delivery."""
    return [run_json(r, ctx.ids) for r in ctx.store.jobs.job_runs(job_id, owner=_owner(who))]
