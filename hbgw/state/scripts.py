"""Lua loader: ``.lua`` files shipped beside the Python module that calls them.

Each script file begins with a comment header naming its KEYS, ARGV and return value. Scripts
are read once per process and registered once per client; redis-py's ``Script`` runs them with
EVALSHA and reloads them by itself after a server restart (NOSCRIPT).
"""

from __future__ import annotations

import threading
from functools import cache
from importlib.resources import files

import redis
from redis.commands.core import Script

from hbgw.core.errors import HbgwError

__all__ = ["load_script", "read_script"]

# Scripts are cached on the client object itself, so the cache dies with the client. A
# module-level map keyed by client would keep every client alive, because each Script holds a
# strong reference to the client it was registered with.
_CACHE_ATTR = "_hbgw_scripts"
_CACHE_LOCK = threading.Lock()


@cache
def read_script(package: str, name: str) -> str:
    """Text of ``name`` (a ``/``-separated path) inside ``package``'s directory."""
    resource = files(package).joinpath(*name.split("/"))
    try:
        text = resource.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError) as exc:
        raise HbgwError(
            f"Lua script {name} is missing from package {package}; reinstall heartbeat-gateway."
        ) from exc
    if not text.startswith("--"):
        raise HbgwError(
            f"Lua script {package}/{name} must start with a comment header naming KEYS and ARGV."
        )
    return text


def load_script(client: redis.Redis, package: str, name: str) -> Script:
    """The registered script ``package``/``name`` for ``client``, cached per (client, script)."""
    key = f"{package}/{name}"
    with _CACHE_LOCK:
        cache_: dict[str, Script] = vars(client).setdefault(_CACHE_ATTR, {})
        script = cache_.get(key)
        if script is None:
            script = client.register_script(read_script(package, name))
            cache_[key] = script
    return script
