"""Where the state Redis is, and how long to wait for it, without importing redis-py: a command
finds out whether there is a Redis to ask before it pays for the client's import, and the quick
client of `hbgw stamp` (``resp_quick``) waits as long as redis-py's (``connection``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hbgw.core.errors import HbgwError

if TYPE_CHECKING:
    from hbgw.core.settings_quick import RedisSettings

REDIS_URL_FILE = "redis.url"

SOCKET_TIMEOUT = 5.0
CONNECT_TIMEOUT = 2.0
# The rule (docs/reliability.md, "Sending under a lock"): a Redis call of a process that holds
# session locks blocks for at most a quarter of the lock lease, never less than this floor (a
# loaded machine must not turn a slow answer into an error). A hung network then shows as an
# error while the lease still runs, and the lock keeper, renewing every third of the lease,
# still gets another try before the lease ends.
LEASE_SHARE = 4
MIN_TIMEOUT = 0.25


def timeouts(lock_lease: float | None) -> tuple[float, float]:
    """(socket, connect) timeouts in seconds for a process whose locks last ``lock_lease``
    seconds (None: it holds none): each at most its default and a quarter of the lease."""
    if lock_lease is None:
        return SOCKET_TIMEOUT, CONNECT_TIMEOUT
    share = max(MIN_TIMEOUT, lock_lease / LEASE_SHARE)
    return min(SOCKET_TIMEOUT, share), min(CONNECT_TIMEOUT, share)


def resolve_redis_url(settings: RedisSettings) -> str:
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
