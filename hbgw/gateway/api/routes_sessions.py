"""Sessions: create, list, show, and their lifecycle (compress, reset, suspend, resume); runs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from hbgw.core.outbound import OutboundGuard
from hbgw.gateway.api.auth import Principal, webhook_refusal
from hbgw.gateway.api.context import ApiContext, context, principal
from hbgw.gateway.api.errors import ApiError
from hbgw.gateway.api.schemas import (
    NewSession,
    RunList,
    Session,
    SessionChange,
    SessionDetail,
    SessionList,
    errors,
)
from hbgw.gateway.api.serial import run_json, session_json
from hbgw.sessions.validation import check_session_names, check_storable

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])

Ctx = Annotated[ApiContext, Depends(context)]
Who = Annotated[Principal, Depends(principal)]
PAGE_MAX = 200
MAX_ID = 2**63 - 1  # the largest id SQL stores


@router.post("", status_code=201, response_model=Session, responses=errors(403, 429))
def create_session(body: NewSession, ctx: Ctx, who: Who) -> JSONResponse:
    """Create a session owned by the token's owner (an admin token may name the owner); an
    owner token opens a slack, telegram, discord or webhook session only on a chat bound to it
    (HBGW_OWNER_CHATS), 403 otherwise."""
    if body.owner is not None and not who.admin:
        raise ApiError(
            422, "invalid_input", "Only the admin token may name an owner; leave 'owner' out."
        )
    ctx.served.check(body.platform)
    owner = body.owner if who.admin else who.owner
    # A malformed name is the caller's typo (422) before it is a question of rights (403).
    check_session_names(platform=body.platform, chat=body.chat, thread=body.thread, owner=owner)
    ctx.check_chat(who, body.platform, body.chat)
    if body.platform != "webhook" and body.webhook_url is not None:
        raise ApiError(
            422, "invalid_input", "Only a webhook session has a 'webhook_url'; leave it out."
        )
    if body.platform == "webhook":
        refusal = webhook_refusal(who, body.webhook_url)
        if refusal is not None:
            raise ApiError(422, "invalid_input", refusal)
    if body.webhook_url is not None:  # the same address rule as PUT /v1/sessions/{id}/webhook
        problem = OutboundGuard(ctx.settings.outbound_allowlist).url_problem(body.webhook_url)
        if problem is not None:
            raise ApiError(422, "invalid_input", problem)
    session = ctx.store_for(who).sessions.create_session(
        platform=body.platform,
        chat=body.chat,
        thread=body.thread,
        owner=owner,
        now=ctx.clock(),
        webhook_url=body.webhook_url,
    )
    return JSONResponse(session_json(session), status_code=201)


@router.get("", response_model=SessionList, responses=errors())
def list_sessions(
    ctx: Ctx,
    who: Who,
    after: Annotated[str | None, Query(max_length=255)] = None,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 50,
) -> dict[str, Any]:
    """The token owner's sessions (every session for the admin), in id order, paged."""
    owner = None if who.admin else who.owner
    if after is not None:
        check_storable(after, "after")
    sessions = ctx.store.sessions.list_sessions(owner=owner, after=after, limit=limit)
    next_after = sessions[-1].id if len(sessions) == limit else None
    return {"sessions": [session_json(s) for s in sessions], "next_after": next_after}


@router.get("/{session_id}", response_model=SessionDetail, responses=errors(404))
def show_session(session_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """The session, and ``active_id``: the session that continues it after compression."""
    session = ctx.session_for(who, session_id)
    active = ctx.store.sessions.resolve_active(session.id)
    return {**session_json(session), "active_id": active.id}


@router.post("/{session_id}/compress", response_model=SessionChange, responses=errors(404, 409))
def compress(session_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Continue the session under a new id (its heartbeat moves along); answers the child."""
    ctx.session_for(who, session_id)
    child = ctx.store.sessions.compress(session_id, ctx.clock())
    ctx.settle(session_id, child.id)
    ctx.wake_streams(session_id)  # its open event streams move to the child now
    reply = f"Session {session_id} continues as {child.id}; its heartbeat, if any, moved along."
    return {"session": session_json(child), "reply": reply}


@router.post("/{session_id}/reset", response_model=SessionChange, responses=errors(404, 409))
def reset(session_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Start the conversation over; its heartbeat is cleared for good."""
    ctx.session_for(who, session_id)
    session = ctx.store.sessions.reset(session_id, ctx.clock())
    ctx.settle(session_id)
    reply = f"Session {session_id} was reset; its heartbeat, if any, is cleared."
    return {"session": session_json(session), "reply": reply}


@router.post("/{session_id}/suspend", response_model=SessionChange, responses=errors(404, 409))
def suspend(session_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Suspend the session; its heartbeat is cleared and not restored on resume."""
    ctx.session_for(who, session_id)
    session = ctx.store.sessions.suspend(session_id, ctx.clock())
    ctx.settle(session_id)
    reply = f"Session {session_id} is suspended; its heartbeat, if any, is cleared."
    return {"session": session_json(session), "reply": reply}


@router.post("/{session_id}/resume", response_model=SessionChange, responses=errors(404, 409))
def resume(session_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Reopen a suspended session (without its old heartbeat)."""
    ctx.session_for(who, session_id)
    session = ctx.store.sessions.resume_session(session_id, ctx.clock())
    return {"session": session_json(session), "reply": f"Session {session_id} is active again."}


@router.get("/{session_id}/runs", response_model=RunList, responses=errors(404))
def runs(
    session_id: str,
    ctx: Ctx,
    who: Who,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 50,
    before: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> dict[str, Any]:
    """The fire ledger of this session, oldest first: its newest ``limit`` runs (below the
    run id ``before``); ``next_before`` pages back to older runs, null on the oldest page."""
    ctx.session_for(who, session_id)
    below = None if before is None else ctx.ids.read(before, "run id")
    page = ctx.store.ledger.runs_page(session_id, limit=limit, before=below)
    next_before = ctx.ids.show(page[0].id) if len(page) == limit else None
    return {"runs": [run_json(r, ctx.ids) for r in page], "next_before": next_before}
