"""The heartbeat of a session: show, set (the /heartbeat grammar), pause, resume, clear.

Each route acts on the session that continues the given one after compression, where the
heartbeat moved; every change reaches the due index like the CLI's (``DueSettle.settle``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter

from hbgw.core.errors import CommandError
from hbgw.gateway.api.auth import Principal
from hbgw.gateway.api.context import ApiContext
from hbgw.gateway.api.errors import ApiError
from hbgw.gateway.api.routes_sessions import Ctx, Who
from hbgw.gateway.api.schemas import HeartbeatChange, HeartbeatSpec, HeartbeatStatus, Reply, errors
from hbgw.sessions.grammar import (
    Clear,
    Command,
    Pause,
    Resume,
    SetHeartbeat,
    check_prompt,
    parse_command,
)
from hbgw.sessions.grammar.costs import check_model, parse_budget
from hbgw.sessions.grammar.policy import policy_words
from hbgw.sessions.heartbeat_commands import apply_command
from hbgw.sessions.store.heartbeat_records import NO_HEARTBEAT
from hbgw.sessions.views import SessionView
from hbgw.state.connection import TRANSIENT_REDIS_ERRORS

router = APIRouter(prefix="/v1/sessions/{session_id}/heartbeat", tags=["heartbeat"])


def _status(ctx: ApiContext, sid: str) -> dict[str, Any]:
    status = replace(ctx.store.heartbeats.heartbeat_status(sid, ctx.clock()), busy=_busy(ctx, sid))
    return {**status.to_json(), "emergency_stop": _estop(ctx, sid)}


def _busy(ctx: ApiContext, sid: str) -> bool | None:
    """Whether a turn holds the session (or messages wait); None when Redis does not answer."""
    if ctx.rt is None:
        return None
    try:
        return not ctx.rt.gate.is_idle(sid)
    except TRANSIENT_REDIS_ERRORS:
        return None


def _estop(ctx: ApiContext, sid: str) -> bool | None:
    """Whether an emergency stop holds the session; null when Redis does not answer."""
    if ctx.rt is None:
        return None
    try:
        return bool(ctx.rt.gate.estop_active(sid))
    except TRANSIENT_REDIS_ERRORS:
        return None


def _active(ctx: ApiContext, who: Principal, session_id: str) -> SessionView:
    ctx.session_for(who, session_id)
    return ctx.store.sessions.resolve_active(session_id)


def _apply(
    ctx: ApiContext, session: SessionView, command: Command, who: Principal
) -> dict[str, Any]:
    reply = apply_command(
        ctx.store_for(who).heartbeats,  # a new heartbeat counts against the owner's quota
        session.id,
        command,
        ctx.clock(),
        origin_chat=session.chat,
        origin_thread=session.thread,
    )
    ctx.settle(session.id)
    return {"reply": reply, "heartbeat": _status(ctx, session.id)}


@router.get("", response_model=HeartbeatStatus, responses=errors(404))
def show(session_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Prompt, schedule, next fire time, fires so far, last outcome; 404 ``no_heartbeat``."""
    session = _active(ctx, who, session_id)
    status = _status(ctx, session.id)
    if status["status"] == NO_HEARTBEAT:
        raise ApiError(404, "no_heartbeat", f"Session {session.id} has no heartbeat.")
    return status


@router.put("", response_model=HeartbeatChange, responses=errors(404, 409, 429))
def put(session_id: str, body: HeartbeatSpec, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Set (or replace) the heartbeat; ``schedule`` is what follows /heartbeat before the
    prompt, and is read by the same grammar, with the same error sentences."""
    session = _active(ctx, who, session_id)
    ctx.served.check(session.platform)  # no heartbeat for a route nobody delivers to
    command = _set_command(ctx, body)
    return _apply(ctx, session, command, who)


def _set_command(ctx: ApiContext, body: HeartbeatSpec) -> SetHeartbeat:
    words = policy_words(
        hours=body.active_hours,
        weekdays=body.weekdays,
        exact=body.exact,
        lasts=body.lasts,
        times=body.times,
        budget=None if body.budget is None else _budget_word(body.budget),
        model=body.model
        if body.model is None
        else check_model(body.model, ctx.limits.allowed_models),
        dedupe=body.dedupe,
        backoff=body.backoff,
    )
    tz = f"--tz {body.tz}" if body.tz else ""
    schedule = " ".join(f"{body.schedule} {tz} {words}".split()) if body.schedule.strip() else ""
    if not schedule:
        raise CommandError(
            "The schedule is required — for example: every 15m, or cron 0 9 * * 1-5."
        )
    # The prompt's own sentence (required, too long) before the line is built and parsed.
    check_prompt(body.prompt, ctx.limits, example="for example: check CI")
    command = parse_command(f"/heartbeat {schedule} {body.prompt}", ctx.limits)
    if not isinstance(command, SetHeartbeat) or command.schedule_text != schedule:
        raise CommandError(
            f"'{schedule}' is not a schedule — for example: every 15m, 1.5h, cron 0 9 * * 1-5, "
            "or @daily --tz Asia/Tokyo."
        )
    return command


def _budget_word(budget: int | str) -> str:
    """The budget as its policy word, refused here with the grammar's sentence when it is none
    (the words would read it as the prompt's start)."""
    word = str(budget).strip()
    parse_budget(word)
    return word


@router.delete("", response_model=Reply, responses=errors(404, 409))
def delete(session_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Remove the heartbeat (kept as cleared for audit, never restored)."""
    session = _active(ctx, who, session_id)
    return {"reply": _apply(ctx, session, Clear(), who)["reply"]}


@router.post("/pause", response_model=HeartbeatChange, responses=errors(404, 409))
def pause(session_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Stop firing but keep the heartbeat."""
    return _apply(ctx, _active(ctx, who, session_id), Pause(), who)


@router.post("/resume", response_model=HeartbeatChange, responses=errors(404, 409))
def resume(session_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Fire again; the clock re-anchors to now (no instant catch-up)."""
    return _apply(ctx, _active(ctx, who, session_id), Resume(), who)
