"""Redis connections: one way to build a client, one way to say that Redis is unreachable."""

from __future__ import annotations

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry

from core.errors import HbgwError
from core.settings import Settings, mask_url
from state.redis_tls import certificate_refused, is_certificate_failure, tls_options, uses_tls

__all__ = [
    "REDIS_URL_FILE",
    "TRANSIENT_REDIS_ERRORS",
    "connect",
    "ping_or_error",
    "refuse_unverified_redis",
    "resolve_redis_url",
]

# What Redis does when it is down, restarting, loading, full or failing over: expected, waited
# out and logged as one line. Any other RedisError (a script bug, a wrong type) is a defect.
TRANSIENT_REDIS_ERRORS: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    redis.OutOfMemoryError,
    redis.ReadOnlyError,
)

REDIS_URL_FILE = "redis.url"
SOCKET_TIMEOUT = 5.0
CONNECT_TIMEOUT = 2.0
# Seconds a pooled connection may sit unused before it is PINGed again on checkout: catches
# connections a restarted server or a NAT silently dropped.
HEALTH_CHECK_INTERVAL = 15


def _retry() -> Retry:
    # Retry only when the connection failed, never on a timeout: a timed-out command may have
    # run, and the Lua scripts (INCR fence, RPUSH inbox, claim) must not run twice. The short
    # cap keeps "Redis is down" quick to report.
    return Retry(
        ExponentialWithJitterBackoff(cap=0.5, base=0.02),
        retries=3,
        supported_errors=(RedisConnectionError,),
    )


def connect(url: str, settings: Settings | None = None) -> redis.Redis:
    """A client for ``url`` returning ``str`` values. Connects lazily, on first command.

    A ``rediss://`` URL always verifies the server's certificate, against HBGW_REDIS_TLS_CA
    when ``settings`` name one (else the system's CAs).
    """
    tls = tls_options(settings, url) if uses_tls(url) else {}
    return redis.Redis.from_url(
        url,
        **tls,
        decode_responses=True,
        socket_timeout=SOCKET_TIMEOUT,
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_keepalive=True,
        health_check_interval=HEALTH_CHECK_INTERVAL,
        retry=_retry(),
    )


def client_url(client: redis.Redis) -> str:
    """Best-effort ``redis://host:port/db`` of a client, for messages (no password)."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    host, port, db = kwargs.get("host", "localhost"), kwargs.get("port", 6379), kwargs.get("db", 0)
    return f"redis://{host}:{port}/{db}"


def ping_or_error(client: redis.Redis, url: str | None = None) -> None:
    """PING, or raise HbgwError with a sentence telling the operator what to do."""
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        where = mask_url(url) if url else client_url(client)
        raise HbgwError(
            f"Cannot reach Redis at {where}: {exc} — start it or unset HBGW_REDIS_URL "
            "to use the embedded server."
        ) from exc


def refuse_unverified_redis(settings: Settings, url: str) -> None:
    """Every role calls this first: a ``rediss://`` server whose certificate does not verify
    stops the process with a sentence (RedisTlsError) instead of being retried for ever. Any
    other failure (Redis down, loading) is left to the role, which waits it out.
    """
    if not uses_tls(url):
        return
    client = connect(url, settings)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        if is_certificate_failure(exc):
            raise certificate_refused(url, settings, exc) from exc
    finally:
        client.close()


def resolve_redis_url(settings: Settings) -> str:
    """HBGW_REDIS_URL, else the embedded server that `hbgw up` or `hbgw demo` started."""
    if settings.redis_url:
        return settings.redis_url
    path = settings.home / REDIS_URL_FILE
    if path.exists():
        return path.read_text().strip()
    raise HbgwError(
        "No Redis: set HBGW_REDIS_URL, or start everything with `hbgw up`, which runs an "
        "embedded Redis and tells the other commands where it is."
    )
