"""A session's conversation: post a message (a /heartbeat or /cron command, or a turn), read it
back."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse

from hbgw.core.errors import BadInput, NotFound, QuotaExceeded
from hbgw.gateway.api.context import ApiContext
from hbgw.gateway.api.errors import command_error_code, not_found
from hbgw.gateway.api.quotas import check_message_rate
from hbgw.gateway.api.routes_sessions import MAX_ID, PAGE_MAX, Ctx, Who
from hbgw.gateway.api.schemas import CommandAnswer, MessageAccepted, MessageList, NewMessage, errors
from hbgw.gateway.api.serial import message_json
from hbgw.gateway.inbound import Answered, Queued
from hbgw.sessions.grammar import is_cron_command, is_heartbeat_command
from hbgw.sessions.validation import IDEMPOTENCY_KEY_CHARS

router = APIRouter(prefix="/v1/sessions", tags=["messages"])

POST_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {"model": CommandAnswer, "description": "A /heartbeat command, answered."},
    202: {"model": MessageAccepted, "description": "A message accepted for a turn."},
    **errors(404, 409, 429),
}


@router.post("/{session_id}/messages", response_model=None, responses=POST_ANSWERS)
def post_message(
    session_id: str,
    body: NewMessage,
    ctx: Ctx,
    who: Who,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", max_length=IDEMPOTENCY_KEY_CHARS)
    ] = None,
) -> JSONResponse:
    """A /heartbeat or /cron command is answered at once (200); other text becomes a turn (202).

    With an ``Idempotency-Key``, a retry returns the first message instead of a second one.
    """
    session = ctx.session_for(who, session_id)
    check_message_rate(ctx.redis, session.id, ctx.settings.api_messages_per_minute)
    command = is_heartbeat_command(body.text) or is_cron_command(body.text)
    try:
        result = ctx.receive(
            session.id, body.text, idempotency_key=idempotency_key, store=ctx.store_for(who)
        )
    except BadInput as exc:
        if isinstance(exc, QuotaExceeded) and is_heartbeat_command(body.text):
            raise  # 429, as PUT …/heartbeat answers the same quota
        if not command:
            if isinstance(exc, NotFound):
                raise not_found(session_id) from None
            raise
        return _command_failed(ctx, session.id, exc)
    return _answer(ctx, result)


def _answer(ctx: ApiContext, result: Answered | Queued) -> JSONResponse:
    """A command's reply (200), or the accepted message (202)."""
    if isinstance(result, Answered):
        ctx.metrics.commands.labels("true").inc()
        answer = {"kind": "command", "session_id": result.session_id, "ok": True}
        return JSONResponse({**answer, "reply": result.text})
    if not result.duplicate:
        ctx.metrics.messages.inc()
    accepted = {
        "kind": "message",
        "session_id": result.session_id,
        "message_id": ctx.ids.show(result.message_id),
        "duplicate": result.duplicate,
        "handed_off": result.handed_off,
    }
    return JSONResponse(accepted, status_code=202)


def _command_failed(ctx: ApiContext, session_id: str, exc: BadInput) -> JSONResponse:
    """A command's error is its answer: the same sentence, as a reply and as an error."""
    ctx.metrics.commands.labels("false").inc()
    code = command_error_code(exc)
    active = ctx.store.sessions.resolve_active(session_id).id
    sentence = str(exc)
    return JSONResponse(
        {
            "kind": "command",
            "session_id": active,
            "ok": False,
            "reply": sentence,
            "error": {"code": code, "message": sentence},
        }
    )


@router.get("/{session_id}/messages", response_model=MessageList, responses=errors(404))
def list_messages(
    session_id: str,
    ctx: Ctx,
    who: Who,
    after: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 50,
) -> dict[str, Any]:
    """This session's messages with an id above ``after``, oldest first (no compression
    followed); ``next_after`` is where the next page starts, null on the last page."""
    ctx.session_for(who, session_id)
    start = ctx.ids.read(after, "message id")
    messages = ctx.store.messages.messages_after(session_id, start, limit=limit)
    next_after = ctx.ids.show(messages[-1].id) if len(messages) == limit else None
    return {"messages": [message_json(m, ctx.ids) for m in messages], "next_after": next_after}
