"""Prometheus metrics of one API app, on a registry of its own (several apps share a process
in tests; the global registry would make them collide).

``/metrics`` needs no token: it carries counts by route template, never a session id or text.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.metrics import clock_offset_gauge


class ApiMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "hbgw_api_requests",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "hbgw_api_request_seconds",
            "Seconds until the response started, by route template and method.",
            ["route", "method"],
            registry=self.registry,
        )
        self.clock_offset = clock_offset_gauge(self.registry)
        self.streams = Gauge(
            "hbgw_api_event_streams_open", "Event streams open now.", registry=self.registry
        )
        self.messages = Counter(
            "hbgw_api_messages_accepted",
            "User messages accepted for a turn (retries with a known key not counted).",
            registry=self.registry,
        )
        self.commands = Counter(
            "hbgw_api_commands_answered",
            "/heartbeat commands answered, by outcome.",
            ["ok"],
            registry=self.registry,
        )


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status = 500

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                route = _route(scope, status)
                self.metrics.latency.labels(route, scope["method"]).observe(
                    time.monotonic() - started
                )
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            route = _route(scope, status)
            self.metrics.requests.labels(route, scope["method"], str(status)).inc()


def _route(scope: Scope, status: int) -> str:
    """The route's template; FastAPI's own pages (/openapi.json, /docs) leave none in the
    scope, and only a success names its path, so no client can mint labels at will."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    return str(scope["path"]) if status < 400 else "unmatched"
