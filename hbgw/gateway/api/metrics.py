"""Prometheus metrics of one API app, on a registry of its own (several apps share a process
in tests; the global registry would make them collide).

``/metrics`` needs no token: it carries counts by route template, never a session id or text.
Every label comes from a closed set (a known method else ``other``, a route template of the
app else ``unmatched``, a status number), so no client can mint series: each series costs
memory for the life of the process, and a label taken from the request would let anyone
grow it without bound.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hbgw.core.metrics import clock_offset_gauge, redis_eviction_gauge
from hbgw.gateway.platforms.guard import InboundRejects

METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}
)


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
        self.redis_eviction = redis_eviction_gauge(self.registry)
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
        self.inbound_rejects = InboundRejects(self.registry)


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
        method = _method(scope)

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                route = _route(scope, status)
                self.metrics.latency.labels(route, method).observe(time.monotonic() - started)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            route = _route(scope, status)
            self.metrics.requests.labels(route, method, str(status)).inc()


def _method(scope: Scope) -> str:
    method = str(scope.get("method", ""))
    return method if method in METHODS else "other"


def _route(scope: Scope, status: int) -> str:
    """The template of the route that answered. FastAPI's own pages (/openapi.json, /docs)
    leave none in the scope: their path names them, and they are a closed set of the app's."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    app = scope.get("app")
    if status < 400 and app is not None and scope["path"] in _page_paths(app):
        return str(scope["path"])
    return "unmatched"


def _page_paths(app: object) -> frozenset[str]:
    routes = getattr(app, "routes", ())
    return frozenset(p for p in (getattr(r, "path", None) for r in routes) if isinstance(p, str))
