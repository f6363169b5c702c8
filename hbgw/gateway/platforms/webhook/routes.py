"""``POST /platforms/webhook/messages``: a message from another gateway, signed with
HBGW_WEBHOOK_SECRET; mounted only when the secret is set.

Order for every request: the body is already bounded (HBGW_API_MAX_BODY_BYTES, 413), then the
signature and the replay window (401), and only then is the body parsed (422 for a shape that
is not a webhook message, with the sentence) — nothing is stored, and no key written, for a
request that fails one of them. The sender's ``id`` is remembered within its owner, chat and
thread (Redis, an hour) so a retry is answered ``{"duplicate": true}`` and dropped; a failure
forgets it, so the retry is taken. Even without Redis a message is stored once: its idempotency
key is ``webhook:<id>``, unique within its session.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from hbgw.core.clock import Clock
from hbgw.gateway.api.context import ApiContext, context
from hbgw.gateway.api.errors import ApiError
from hbgw.gateway.platforms.guard import (
    InboundRejects,
    NotJson,
    Reject,
    SeenEvents,
    read_json,
    unsigned,
)
from hbgw.gateway.platforms.webhook import signature
from hbgw.gateway.platforms.webhook.inbound import PLATFORM, NotAMessage, read_message, take_message

log = logging.getLogger("hbgw.webhook")


class WebhookEdge:
    """The signed-webhook endpoint's parts in one API process."""

    def __init__(
        self, secret: str, clock: Clock, seen: SeenEvents, rejects: InboundRejects
    ) -> None:
        self.secret = secret
        self.clock = clock
        self.seen = seen
        self.rejects = rejects

    async def verified(self, request: Request) -> bytes:
        """The body, if it was signed with the secret just now; else an ApiError (401)."""
        body = await request.body()
        problem = signature.problem(self.secret, request.headers, body, self.clock().timestamp())
        if problem is not None:
            raise unsigned(
                self.rejects,
                PLATFORM,
                problem,
                stale="The request's X-Hbgw-Timestamp is more than five minutes from the "
                "gateway's clock; sign every request anew.",
                forged="The request does not carry a valid X-Hbgw-Signature (HMAC-SHA256 of "
                "'<X-Hbgw-Timestamp>.<body>' with the shared secret).",
            )
        return body

    def malformed(self, sentence: str) -> ApiError:
        self.rejects.count(PLATFORM, Reject.MALFORMED)
        return ApiError(422, "invalid_input", f"Not a webhook message: {sentence}")


def edge(request: Request) -> WebhookEdge:
    found = request.app.state.webhook
    assert isinstance(found, WebhookEdge)
    return found


router = APIRouter(prefix="/platforms/webhook", tags=["webhook"])


@router.post("/messages", response_model=None)
async def messages(request: Request) -> JSONResponse:
    """A signed message: a turn (202) or a /heartbeat command answered (200)."""
    hook = edge(request)
    body = await hook.verified(request)
    try:
        message = read_message(read_json(body))
    except ValueError as exc:  # NotAMessage, and JSON that does not parse
        sentence = str(exc) if isinstance(exc, NotAMessage | NotJson) else "the body is not JSON."
        raise hook.malformed(sentence) from None
    if not await run_in_threadpool(hook.seen.first, message.seen_id):
        log.info("webhook message %s seen before", message.id, extra={"action": "webhook.repeat"})
        return JSONResponse({"kind": "duplicate", "id": message.id, "duplicate": True})
    ctx = context(request)
    try:
        status, answer = await run_in_threadpool(take_message, ctx, message)
    except BaseException:
        await run_in_threadpool(hook.seen.forget, message.seen_id)  # the retry must be taken
        raise
    return JSONResponse(answer, status_code=status)


def mount(app: FastAPI, ctx: ApiContext) -> None:
    """Serve the webhook endpoint on ``app`` (called only when HBGW_WEBHOOK_SECRET is set)."""
    secret = ctx.settings.webhook_secret
    assert secret is not None
    seen = SeenEvents(ctx.redis, PLATFORM)
    rejects = ctx.metrics.inbound_rejects
    app.state.webhook = WebhookEdge(secret.get_secret_value(), ctx.clock, seen, rejects)
    app.include_router(router)
