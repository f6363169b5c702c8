"""``GET`` and ``PUT /v1/sessions/{id}/webhook``: the URL a webhook session's replies and
heartbeats are POSTed to, behind the API's bearer tokens like the session's other routes.

``PUT {"url": "https://…"}`` keeps it on the session (compression and a switch carry it
along); ``{"url": null}`` forgets it, and HBGW_WEBHOOK_URL applies again — the admin token's
alone: an owner's session never falls back to the operator's partner route (403). Answers show the
URL's origin only (``https://host/…``): its path or query often holds the receiver's token.
A URL whose host is inside the gateway's network is refused with 422 (``core/outbound.py``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from hbgw.core.outbound import OutboundGuard
from hbgw.core.webhook_url import webhook_url_problem
from hbgw.gateway.api.auth import webhook_refusal
from hbgw.gateway.api.errors import ApiError
from hbgw.gateway.api.routes_sessions import Ctx, Who
from hbgw.gateway.api.schemas import Request, Response, errors
from hbgw.gateway.platforms.webhook.inbound import PLATFORM
from hbgw.gateway.platforms.webhook.redact import origin

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


class WebhookTarget(Request):
    url: str | None
    """http(s) URL every message of the session is POSTed to; null: HBGW_WEBHOOK_URL."""


class WebhookRoute(Response):
    session_id: str
    url: str | None
    """The URL's origin (``https://host/…``), or null when the session has none."""
    default: bool
    """True when messages go to HBGW_WEBHOOK_URL (the session names none of its own)."""
    reply: str | None = None


@router.get("/{session_id}/webhook", response_model=WebhookRoute, responses=errors(404))
def show_webhook(session_id: str, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Where the session's messages are POSTed."""
    session = ctx.session_for(who, session_id)
    return _route(ctx, session.id, ctx.store.webhooks.webhook_url(session.id))


@router.put("/{session_id}/webhook", response_model=WebhookRoute, responses=errors(403, 404))
def set_webhook(session_id: str, body: WebhookTarget, ctx: Ctx, who: Who) -> dict[str, Any]:
    """Set (or, with null, forget) the URL a webhook session's messages are POSTed to."""
    session = ctx.session_for(who, session_id)
    if session.platform != PLATFORM:
        raise ApiError(
            422,
            "invalid_input",
            f"Session {session.id} is on {session.platform}, not webhook: only a webhook "
            "session's messages are POSTed to a URL.",
        )
    refusal = webhook_refusal(who, body.url)
    if refusal is not None:  # null would hand the owner's session the operator's route
        raise ApiError(403, "forbidden", refusal)
    # An inside address (in any notation, or a name resolving to one now) is refused here,
    # before anything is stored; the worker checks the address it connects to again.
    guard = OutboundGuard(ctx.settings.outbound_allowlist)
    url = body.url
    problem = None if url is None else webhook_url_problem(url) or guard.url_problem(url)
    if problem is not None:
        raise ApiError(422, "invalid_input", problem)
    kept = ctx.store.webhooks.set_webhook_url(session.id, body.url, ctx.clock())
    answer = _route(ctx, session.id, kept)
    where = answer["url"] or "HBGW_WEBHOOK_URL"
    if answer["url"] is None and not ctx.settings.webhook_url:
        where = "nowhere (set a URL, or HBGW_WEBHOOK_URL)"
    return {**answer, "reply": f"Session {session.id}'s messages are POSTed to {where}."}


def _route(ctx: Any, session_id: str, url: str | None) -> dict[str, Any]:
    default = url is None and bool(ctx.settings.webhook_url)
    return {"session_id": session_id, "url": origin(url) if url else None, "default": default}
