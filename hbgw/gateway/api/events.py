"""``GET /v1/sessions/{id}/events``: what the session delivers, as server-sent events.

SQL is the truth: every reply, notice and heartbeat answer is stored as it is delivered, and the
stream reads SQL for messages above the last id sent. It reads when woken: the writer of a
delivered message publishes a wake-up on the session's Redis channel after its commit, and the
API process's one subscriber (``state.stream_wake``) wakes the streams of that session. Without
a wake-up a stream still reads every HBGW_API_STREAM_POLL seconds, which catches a wake-up lost
to a Redis outage (and a compression made outside the API). Only assistant messages are sent:
the user's own messages came from the client, and a heartbeat turn's prompt is not a delivery.
A silent heartbeat answer sent nothing to the chat, and sends nothing here. A failing read (the
database away for a moment) is logged and tried again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from hbgw.core.errors import BadInput, HbgwError
from hbgw.gateway.api.context import ApiContext
from hbgw.gateway.api.routes_sessions import MAX_ID, Ctx, Who
from hbgw.gateway.api.schemas import errors
from hbgw.gateway.api.serial import is_silent_answer, message_json
from hbgw.gateway.public_ids import PublicIds
from hbgw.sessions.states import ClosedReason, SessionStatus
from hbgw.sessions.views import MessageView

router = APIRouter(prefix="/v1/sessions", tags=["events"])
log = logging.getLogger("hbgw.api.events")

KEEP_ALIVE = 15.0
BATCH = 100
STREAM = {200: {"content": {"text/event-stream": {}}, "description": "An event stream."}}


def delivered(message: MessageView) -> bool:
    """What reached the chat: assistant replies and notices, heartbeat answers unless silent."""
    return message.role == "assistant" and not is_silent_answer(message)


def message_event(message: MessageView, ids: PublicIds) -> str:
    data = json.dumps(message_json(message, ids), ensure_ascii=False)
    return f"id: {ids.show(message.id)}\nevent: message\ndata: {data}\n\n"


@router.get(
    "/{session_id}/events",
    response_class=StreamingResponse,
    responses={**STREAM, **errors(404, 429)},  # type: ignore[dict-item]
)
def events(
    session_id: str,
    request: Request,
    ctx: Ctx,
    who: Who,
    after: Annotated[int | None, Query(ge=0, le=MAX_ID)] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)] = None,
) -> StreamingResponse:
    """Replies and heartbeat turns as they are delivered. Resumes after ``Last-Event-ID`` or
    ``?after=``; without either, only messages newer than the newest one now. Follows the
    session through compression (``event: session`` with ``moved_to``)."""
    ctx.session_for(who, session_id)
    start = _start(ctx, session_id, after, last_event_id)
    release = ctx.streams.take(who, ctx.settings.api_max_streams_per_owner)
    stream = _stream(ctx, request, session_id, start, release)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    # The slot goes back when the stream ends, or when the response does if it never began.
    return StreamingResponse(
        stream, media_type="text/event-stream", headers=headers, background=BackgroundTask(release)
    )


def _start(ctx: ApiContext, sid: str, after: int | None, last_event_id: str | None) -> int:
    resume = _last_event_id(last_event_id)
    if resume is not None:
        return ctx.ids.read(resume, "Last-Event-ID")
    if after is not None:
        return ctx.ids.read(after, "message id")
    newest = ctx.store.messages.list_messages(sid, limit=1)
    return newest[-1].id if newest else 0


def _last_event_id(header: str | None) -> int | None:
    """The id of ``Last-Event-ID``; ASCII digits only (``str.isdigit`` takes '²', which
    ``int`` refuses), blank means absent."""
    text = (header or "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()):
        raise BadInput(
            "The Last-Event-ID header is not a message id; send the id of the last event "
            "received (digits), or leave the header out."
        )
    return min(int(text), MAX_ID)


async def _stream(
    ctx: ApiContext, request: Request, sid: str, last: int, release: Callable[[], None]
) -> AsyncIterator[str]:
    ctx.metrics.streams.inc()
    watch = ctx.waker.watch(sid)
    quiet_since = read_by = time.monotonic()
    woken = True  # the first read
    try:
        yield ": connected\n\n"
        while not ctx.stopping.is_set() and not await request.is_disconnected():
            if woken or time.monotonic() >= read_by:
                watch.clear()  # a wake-up during the read is kept for the wait below
                read = await _read(ctx, sid, last)
                # A failed read is tried again after a sweep period, not a whole recheck.
                wait = _recheck(ctx) if read is not None else ctx.settings.api_stream_poll
                read_by = time.monotonic() + wait
                batch, moved = read or ([], None)
                for message in batch:
                    last = message.id
                    if delivered(message):
                        quiet_since = time.monotonic()
                        yield message_event(message, ctx.ids)
                if moved is not None and len(batch) < BATCH:
                    sid = moved
                    watch.move(moved)
                    yield f"event: session\ndata: {json.dumps({'moved_to': moved})}\n\n"
                if moved is not None or len(batch) == BATCH:
                    continue  # more to read now
            if time.monotonic() - quiet_since >= KEEP_ALIVE:
                quiet_since = time.monotonic()
                yield ": keep-alive\n\n"
            now = time.monotonic()
            woken = await watch.wait(min(read_by - now, KEEP_ALIVE - (now - quiet_since)))
    finally:
        watch.close()
        ctx.metrics.streams.dec()
        release()


def _recheck(ctx: ApiContext) -> float:
    """Seconds to the stream's next own read: HBGW_API_STREAM_RECHECK, give or take a quarter,
    so that streams opened together (a replica's clients reconnecting) do not read together."""
    return ctx.settings.api_stream_recheck * random.uniform(0.75, 1.25)


async def _read(
    ctx: ApiContext, sid: str, last: int
) -> tuple[list[MessageView], str | None] | None:
    """The next messages (``_poll``), or None when the read failed (logged)."""
    try:
        return await run_in_threadpool(_poll, ctx, sid, last)
    except HbgwError as exc:
        log.warning(
            "event stream read failed; trying again: %s",
            exc,
            extra={"action": "api.events_retry", "session": sid},
        )
        return None


def sweep_start(ctx: ApiContext) -> tuple[int, int] | None:
    """Where the sweep starts, read before the API serves: the newest message id now (None
    when the database is away: the first sweep reads it then)."""
    try:
        return _newest(ctx)
    except HbgwError:
        return None


async def sweep(ctx: ApiContext, marks: tuple[int, int] | None) -> None:
    """The process's slow poll, for wake-ups lost (Redis away, a writer that could not publish):
    every HBGW_API_STREAM_POLL seconds ONE query finds the sessions with newer messages, and
    their open streams are woken. It reads from the newest id of the sweep before last, as a
    message may commit after one with a higher id (PostgreSQL hands ids out at INSERT). It runs
    with no stream open too, so that its marks stay near the newest message."""
    while not ctx.stopping.is_set():
        await asyncio.sleep(ctx.settings.api_stream_poll)
        try:
            marks = await run_in_threadpool(_sweep_once, ctx, marks)
        except HbgwError as exc:
            log.warning(
                "event stream sweep failed; trying again: %s",
                exc,
                extra={"action": "api.events_sweep_retry"},
            )


def _sweep_once(ctx: ApiContext, marks: tuple[int, int] | None) -> tuple[int, int]:
    if marks is None:
        return _newest(ctx)
    older, newer = marks
    found = ctx.store.messages.sessions_with_messages_after(older)
    ctx.waker.wake_sessions(found)
    return newer, max(newer, *found.values()) if found else newer


def _newest(ctx: ApiContext) -> tuple[int, int]:
    newest = ctx.store.messages.newest_message_id()
    return newest, newest


def _poll(ctx: ApiContext, sid: str, last: int) -> tuple[list[MessageView], str | None]:
    """The next messages, and the child id when the session was compressed meanwhile."""
    batch = ctx.store.messages.messages_after(sid, last, limit=BATCH)
    session = ctx.store.sessions.get_session(sid)
    if session.status == SessionStatus.CLOSED and session.closed_reason == ClosedReason.COMPRESSED:
        child = ctx.store.sessions.resolve_active(sid)
        if child.id != sid:
            return batch, child.id
    return batch, None
