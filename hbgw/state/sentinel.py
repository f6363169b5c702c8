"""Redis behind Sentinel: ``sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…]/SERVICE[/DB]``.

The URL names the sentinels (any number, comma-separated), the service (the ``sentinel
monitor`` name) and the database; the password is the primary's (the sentinels themselves are
asked without one). Every connection the gateway opens asks the sentinels for the current
primary first, so after a failover new connections find the promoted replica; a connection to
the old primary fails (refused, or ``READONLY`` once it is a replica) and is opened again the
same way. Kombu (Celery's broker) has its own Sentinel transport and its own URL form, written
by ``kombu_url``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import redis
from redis.sentinel import Sentinel, SentinelConnectionPool

from hbgw.core.errors import BadInput
from hbgw.core.masking import mask_url

SCHEME = "sentinel"
DEFAULT_PORT = 26379


@dataclass(frozen=True)
class SentinelUrl:
    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None


def is_sentinel(url: str) -> bool:
    return urlsplit(url).scheme.lower() == SCHEME


def parse(url: str) -> SentinelUrl:
    """The parts of a ``sentinel://`` URL, or ``BadInput`` naming what is missing."""
    parts = urlsplit(url)
    auth, _, hosts = parts.netloc.rpartition("@")
    username, _, password = auth.partition(":") if auth else ("", "", "")
    path = [p for p in parts.path.split("/") if p]
    if not hosts or not path or len(path) > 2:
        raise BadInput(
            f"HBGW_REDIS_URL {mask_url(url)} is not a Sentinel URL the gateway reads: write "
            "sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT…]/SERVICE[/DB]."
        )
    try:
        sentinels = tuple(_host_port(h) for h in hosts.split(",") if h)
        db = int(path[1]) if len(path) == 2 else 0
    except ValueError as exc:
        raise BadInput(
            f"HBGW_REDIS_URL {mask_url(url)}: {exc}; ports and the database are numbers."
        ) from exc
    return SentinelUrl(
        sentinels,
        unquote(path[0]),
        db,
        unquote(username) or None,
        unquote(password) or None,
    )


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host:
        return text, DEFAULT_PORT
    return host, int(port)


class SentinelBlockingPool(SentinelConnectionPool, redis.BlockingConnectionPool):
    """Sentinel's discovery with the blocking pool every other client of the gateway uses (a
    thread that finds every connection busy waits for one, instead of failing)."""


def sentinel_client(url: str, **connection: Any) -> redis.Redis:
    """A client of the service's current primary; ``connection``: the pool's keyword
    arguments (``max_connections``, ``timeout``, socket options, ``retry``…)."""
    where = parse(url)
    asker = Sentinel(  # type: ignore[no-untyped-call]
        list(where.sentinels),
        sentinel_kwargs={
            "socket_timeout": connection.get("socket_timeout"),
            "socket_connect_timeout": connection.get("socket_connect_timeout"),
        },
    )
    pool = SentinelBlockingPool(  # type: ignore[no-untyped-call]
        where.service,
        asker,
        db=where.db,
        username=where.username,
        password=where.password,
        **connection,
    )
    return redis.Redis(connection_pool=pool)


def kombu_url(url: str) -> tuple[str, dict[str, Any]]:
    """Kombu's form of a ``sentinel://`` URL (one ``sentinel://`` per sentinel, joined by
    ``;``) and the transport options it needs (the service as ``master_name``)."""
    where = parse(url)
    auth = ""
    if where.password:
        auth = f"{quote(where.username or '', safe='')}:{quote(where.password, safe='')}@"
    joined = ";".join(f"sentinel://{auth}{h}:{p}/{where.db}" for h, p in where.sentinels)
    return joined, {"master_name": where.service}
