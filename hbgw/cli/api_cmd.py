"""`hbgw api`: the HTTP API under uvicorn."""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING

import typer

from hbgw.cli.common import settings
from hbgw.core.errors import BadInput
from hbgw.core.netaddr import is_loopback

if TYPE_CHECKING:
    from hbgw.core.settings import Settings


def api(
    host: str | None = typer.Option(
        None, "--host", help="Address to listen on (default HBGW_API_HOST, 127.0.0.1)."
    ),
    port: int | None = typer.Option(
        None, "--port", min=0, max=65535, help="Port (default HBGW_API_PORT, 8780; 0: any)."
    ),
    fd: int | None = typer.Option(
        None,
        "--fd",
        min=0,
        help="Serve on this inherited listening socket instead of binding --host/--port "
        "(what `hbgw up` does, so no other process can take its port).",
    ),
) -> None:
    """Run the HTTP API: sessions, messages, heartbeats, runs, events; OpenAPI at /openapi.json.

    Requests carry a bearer token of HBGW_API_TOKENS (one owner's sessions) or HBGW_ADMIN_TOKEN.
    Without any token configured it listens only on a loopback address.
    """
    from hbgw.core.logs import configure_logging
    from hbgw.gateway.api.auth import TokenTable

    s = settings()
    inherited = _inherited(fd) if fd is not None else None
    host = str(inherited.getsockname()[0]) if inherited else host or s.api_host
    port = s.api_port if port is None else port
    if TokenTable.from_settings(s).empty and not is_loopback(host):
        raise BadInput(
            f"No API token is configured, so the API will not listen on {host}: set "
            "HBGW_API_TOKENS (owner:token pairs) or HBGW_ADMIN_TOKEN, or use --host 127.0.0.1."
        )
    configure_logging(s)
    _serve(s, inherited or _listen(host, port), host)


def _inherited(fd: int) -> socket.socket:
    """The listening socket a parent handed down as descriptor ``fd``."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise BadInput(f"--fd {fd} is not an open socket ({exc.strerror}).") from None
    if (
        sock.type != socket.SOCK_STREAM
        or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) != 1
    ):
        sock.detach()
        raise BadInput(f"--fd {fd} is not a listening TCP socket.")
    return sock


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that port 0 gets its real port before the log line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise BadInput(
            f"Cannot listen on {host}:{port}: {exc.strerror}; pick another --port."
        ) from None
    return sock


def _serve(s: Settings, sock: socket.socket, host: str) -> None:
    from hbgw.broker import redis_urls
    from hbgw.celery_app import make_celery
    from hbgw.core.errors import HbgwError
    from hbgw.gateway.api.app import create_app
    from hbgw.gateway.api.server import api_server
    from hbgw.state.connection import refuse_evicting_redis_at, refuse_unverified_redis
    from hbgw.state.runtime import resolve_redis_url

    log = logging.getLogger("hbgw.api")
    try:
        redis_url: str | None = resolve_redis_url(s)
    except HbgwError as exc:
        redis_url = None
        log.warning("no Redis: %s", exc, extra={"action": "api.no_redis"})
    if redis_url:
        refuse_unverified_redis(s, redis_url)
    celery = make_celery(s, redis_url) if redis_url else None
    app = create_app(s, celery_app=celery, redis_url=redis_url)
    if redis_url:  # the gauge is the app's own (its registry is the one /metrics serves)
        gauge = app.state.api.metrics.redis_eviction
        refuse_evicting_redis_at(s, redis_urls(s, redis_url), gauge)
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if sock.family == socket.AF_INET6 else host
    url = f"http://{shown}:{bound}"
    log.info("API listening on %s", url, extra={"action": "api.start", "url": url})
    api_server(app, host, bound).run(sockets=[sock])
