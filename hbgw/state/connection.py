"""Redis connections: one way to build a client, one way to say that Redis is unreachable."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from prometheus_client import Gauge
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry

from hbgw.core.errors import HbgwError
from hbgw.core.masking import mask_url
from hbgw.core.settings_quick import RedisSettings
from hbgw.state.cluster import cluster_client, cluster_url_of, is_cluster
from hbgw.state.eviction import EvictingRedis, policy_check, refuse_evicting_redis
from hbgw.state.redis_tls import certificate_refused, is_certificate_failure, tls_options, uses_tls
from hbgw.state.redis_url import (
    CONNECT_TIMEOUT,
    LEASE_SHARE,
    MIN_TIMEOUT,
    REDIS_URL_FILE,
    SOCKET_TIMEOUT,
    resolve_redis_url,
    timeouts,
)
from hbgw.state.sentinel import is_sentinel, sentinel_client

__all__ = [
    "CONNECT_TIMEOUT",
    "LEASE_SHARE",
    "MIN_TIMEOUT",
    "REDIS_URL_FILE",
    "SOCKET_TIMEOUT",
    "TRANSIENT_REDIS_ERRORS",
    "connect",
    "ping_or_error",
    "refuse_evicting_redis_at",
    "refuse_unverified_redis",
    "resolve_redis_url",
    "timeouts",
]

# What Redis does when it is down, restarting, loading, full or failing over: expected, waited
# out and logged as one line. Any other RedisError (a script bug, a wrong type) is a defect.
TRANSIENT_REDIS_ERRORS: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    redis.OutOfMemoryError,
    redis.ReadOnlyError,
    # A Redis Cluster failing over: a slot without a primary for a moment.
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.SlotNotCoveredError,
)

# Seconds a pooled connection may sit unused before it is PINGed again on checkout: catches
# connections a restarted server or a NAT silently dropped.
HEALTH_CHECK_INTERVAL = 15
# Connections of one client; a worker sizes its own to its turns (``Runtime.from_settings``).
MAX_CONNECTIONS = 100


def _retry() -> Retry:
    # Retry only when the connection failed, never on a timeout: a timed-out command may have
    # run, and the Lua scripts (INCR fence, RPUSH inbox, claim) must not run twice. The short
    # cap keeps "Redis is down" quick to report.
    return Retry(
        ExponentialWithJitterBackoff(cap=0.5, base=0.02),
        retries=3,
        supported_errors=(RedisConnectionError,),
    )


def connect(
    url: str,
    settings: RedisSettings | None = None,
    *,
    lock_lease: float | None = None,
    max_connections: int = MAX_CONNECTIONS,
    retry: bool = True,
) -> redis.Redis:
    """A client for ``url`` returning ``str`` values. Connects lazily, on first command
    (a Redis Cluster's client reads the slot map at once).

    A ``rediss://`` URL always verifies the server's certificate, against HBGW_REDIS_TLS_CA
    when ``settings`` name one (else the system's CAs). ``lock_lease``: the session lock lease
    of a process that holds locks; its timeouts are sized against it (``timeouts``).

    At most ``max_connections`` connections; a thread that finds them all busy waits for one
    (up to the connect timeout) instead of failing: redis-py's default pool raised "Too many
    connections" at its 100th, and a worker holding 256 turns failed turns by the dozen.

    ``retry=False``: a lost connection is raised at once instead of redis-py retrying it quietly
    (the stream waker must see it). Set here: ``Redis.set_retry`` fails on a blocking pool.

    Each connection reads the eviction policy as it is made (``state/eviction.py``): one that
    ``settings`` do not accept fails it (``EvictingRedis``), waited out like a Redis away.
    """
    accepted = settings.redis_accept_eviction if settings is not None else None
    socket_timeout, connect_timeout = timeouts(lock_lease)
    options: dict[str, Any] = {
        "max_connections": max_connections,
        "timeout": connect_timeout,
        "decode_responses": True,
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": connect_timeout,
        "socket_keepalive": True,
        "health_check_interval": HEALTH_CHECK_INTERVAL,
        "retry": _retry() if retry else Retry(NoBackoff(), 0),
        "redis_connect_func": policy_check(accepted),
    }
    if is_sentinel(url):
        return sentinel_client(url, **options)
    tls = tls_options(settings, url) if uses_tls(url) else {}
    if is_cluster(url):
        # The cluster client's own hook does the handshake, then calls this one.
        options["redis_connect_func"] = policy_check(accepted, handshake=False)
        # Typed as redis.Redis for the callers: the cluster client answers the same commands.
        return cluster_client(url, tls, **options)  # type: ignore[return-value]
    if url.startswith("unix://"):
        del options["socket_keepalive"]  # a TCP option: redis-py's unix connection refuses it
    pool = redis.BlockingConnectionPool.from_url(url, **tls, **options)
    return redis.Redis(connection_pool=pool)


def client_url(client: redis.Redis) -> str:
    """Best-effort ``redis://host:port/db`` of a client, for messages (no password)."""
    cluster = cluster_url_of(client)
    if cluster is not None:
        return cluster
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


def refuse_unverified_redis(settings: RedisSettings, url: str) -> None:
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


def refuse_evicting_redis_at(settings: RedisSettings, urls: Sequence[str], gauge: Gauge) -> None:
    """Every role calls this at start, after ``refuse_unverified_redis``, with its state Redis
    and a Redis broker apart from it: one evicting keys under a policy ``settings`` do not
    accept stops the process with a sentence (``EvictingRedis``); an accepted one is a warning
    and ``gauge``. A Redis that does not answer is left to the role, which waits it out (the
    state's connections check again as they are made)."""
    gauge.clear()
    for url in urls:
        client = connect(url, settings)
        try:
            refuse_evicting_redis(client, url, settings.redis_accept_eviction, gauge)
        except EvictingRedis:
            raise
        except (redis.RedisError, OSError):
            continue
        finally:
            client.close()
