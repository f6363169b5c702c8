"""The API app factory: ``create_app(settings, celery_app=..., clock=...)``.

The Celery app comes from ``hbgw`` (the gateway layer does not build processes); without one,
accepted messages wait in their inbox until beat's sweeper hands them to a worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from hbgw.core.clock import Clock
from hbgw.core.settings import Settings
from hbgw.gateway.api import (
    docs_page,
    errors,
    events,
    health,
    routes_cron,
    routes_heartbeat,
    routes_messages,
    routes_owner,
    routes_sessions,
)
from hbgw.gateway.api.context import ApiContext, build_context, context
from hbgw.gateway.api.limits import BodyLimit
from hbgw.gateway.api.metrics import MetricsMiddleware
from hbgw.gateway.platforms.discord import routes as discord_routes
from hbgw.gateway.platforms.guard import Reject
from hbgw.gateway.platforms.slack import routes as slack_routes
from hbgw.gateway.platforms.telegram import routes as telegram_routes
from hbgw.gateway.platforms.webhook import routes as webhook_routes
from hbgw.gateway.platforms.webhook import session_url

TITLE = "Heartbeat Gateway API"
VERSION = "1"


def create_app(
    settings: Settings,
    *,
    celery_app: Any = None,
    clock: Clock | None = None,
    redis_url: str | None = None,
) -> FastAPI:
    """``redis_url``: unset means HBGW_REDIS_URL, or the embedded server of `hbgw up`.
    ``clock``: unset means the shared clock, Redis ``TIME`` (this host's without Redis)."""
    ctx = build_context(settings, celery_app=celery_app, clock=clock, redis_url=redis_url)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        ctx.waker.start()  # the process's one pub/sub subscriber, for the event streams
        swept = asyncio.create_task(events.sweep(ctx, events.sweep_start(ctx)))
        try:
            yield
        finally:
            ctx.stop_streams()
            swept.cancel()
            ctx.close()

    app = docs_page.offline_app(title=TITLE, version=VERSION, lifespan=lifespan)
    app.state.api = ctx
    errors.install(app)
    modules = (routes_sessions, routes_messages, routes_heartbeat, routes_cron, routes_owner)
    for module in (*modules, events, health):
        app.include_router(module.router)
    app.include_router(session_url.router)  # a webhook session's URL, set before its secret
    if settings.slack_configured:  # the platform's endpoints exist only with its settings
        slack_routes.mount(app, ctx)
    if settings.telegram_configured:
        telegram_routes.mount(app, ctx)
    if settings.discord_configured:
        discord_routes.mount(app, ctx)
    if settings.webhook_configured:
        webhook_routes.mount(app, ctx)
    app.add_api_route(
        "/metrics", _metrics, methods=["GET"], tags=["health"], response_class=PlainTextResponse
    )
    # Outermost last: metrics see every answer, the 413s of the body limit included.
    rejects = ctx.metrics.inbound_rejects
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.api_max_body_bytes,
        read_timeout=settings.api_read_timeout,
        refused=lambda path: rejects.count_path(path, Reject.TOO_LARGE),
    )
    app.add_middleware(MetricsMiddleware, metrics=ctx.metrics)
    return app


def api_context(app: FastAPI) -> ApiContext:
    ctx = app.state.api
    assert isinstance(ctx, ApiContext)
    return ctx


def _metrics(request: Request) -> Response:
    """Prometheus text: requests by route and status, latency, open streams, messages, commands."""
    registry = context(request).metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
