"""Where the state Redis is, without importing redis-py: a command finds out whether there is a
Redis to ask before it pays for the client's import (`hbgw stamp`, `hbgw heartbeat status`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hbgw.core.errors import HbgwError

if TYPE_CHECKING:
    from hbgw.core.settings_quick import StoreSettings

REDIS_URL_FILE = "redis.url"


def resolve_redis_url(settings: StoreSettings) -> str:
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
