"""Redis' eviction policy: the gateway's keys must never be evicted to make room.

A fence counter, an inbox, a due entry or a queue binding that Redis drops on its own is state
the gateway relies on (issue 29, finding 7: 211 keys evicted under ``allkeys-lru``, heartbeats
36 s late). So every role reads ``maxmemory-policy`` at start (``refuse_evicting_redis``) and
every connection reads it again when it is made (``policy_check``, redis-py's connect hook), so a
reconnect to a server whose policy changed is caught too. Anything but ``noeviction`` is refused
unless the operator named that very policy in ``HBGW_REDIS_ACCEPT_EVICTION``: a later change to
another policy is refused again.

``CONFIG`` is often renamed or denied on managed Redis; ``INFO memory`` carries the same field.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import redis
from prometheus_client import Gauge

from hbgw.core.errors import UnsafeRedis
from hbgw.core.masking import mask_url

log = logging.getLogger("hbgw.redis")

SAFE_POLICY = "noeviction"
UNREADABLE = "unreadable"  # neither CONFIG GET nor INFO answered the policy


class EvictingRedis(UnsafeRedis, redis.ConnectionError):
    """Redis evicts keys under a policy nobody accepted. A ``redis.ConnectionError`` too: a
    connection made at run time to such a server is refused, and every caller already treats
    that as "Redis is away" (one log line with this sentence, then wait and retry)."""


def refusal(policy: str, where: str, accepted: str | None) -> str:
    """The sentence: what Redis does, why that is refused, and how to fix it."""
    if policy == UNREADABLE:
        return (
            f"Cannot read the maxmemory-policy of Redis at {where}: CONFIG GET and INFO were both "
            "refused. Allow this user `CONFIG GET` or `INFO` (ACL `+config|get` or `+info`), "
            "or set HBGW_REDIS_ACCEPT_EVICTION=unreadable to run without the check."
        )
    change = f" (HBGW_REDIS_ACCEPT_EVICTION accepts {accepted} only)" if accepted else ""
    return (
        f"Redis at {where} runs with maxmemory-policy {policy}: it may evict the gateway's "
        f"fences, inboxes and due entries to make room{change}. Run `redis-cli CONFIG SET "
        "maxmemory-policy noeviction` (and keep it in redis.conf), or on a managed Redis set "
        "the parameter group's maxmemory-policy to noeviction; to run on this policy anyway, "
        f"set HBGW_REDIS_ACCEPT_EVICTION={policy}."
    )


def acceptable(policy: str, accepted: str | None) -> bool:
    return policy == SAFE_POLICY or (accepted is not None and policy == accepted)


def policy_of_info(info: str | dict[str, Any]) -> str:
    if isinstance(info, dict):
        return str(info.get("maxmemory_policy", UNREADABLE))
    for line in info.splitlines():
        name, _, value = line.partition(":")
        if name == "maxmemory_policy":
            return value.strip()
    return UNREADABLE


def read_policy(client: redis.Redis) -> str:
    """The server's ``maxmemory-policy``: ``CONFIG GET``, else ``INFO memory``."""
    try:
        answer = client.config_get("maxmemory-policy")
        if "maxmemory-policy" in answer:
            return str(answer["maxmemory-policy"])
    except redis.ResponseError:
        pass  # renamed, disabled or denied by an ACL: INFO has the same field
    try:
        return policy_of_info(client.info("memory"))
    except redis.ResponseError:
        return UNREADABLE


def _decoded(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def connection_policy(conn: Any) -> str:
    """``read_policy`` on one connection being made (inside redis-py's connect); ``conn``: a
    redis-py connection (its methods are untyped)."""
    try:
        conn.send_command("CONFIG", "GET", "maxmemory-policy", check_health=False)
        answer = conn.read_response()
        pairs = (
            answer.items()
            if isinstance(answer, dict)
            else zip(answer[::2], answer[1::2], strict=True)
        )
        for name, value in pairs:
            if _decoded(name) == "maxmemory-policy":
                return _decoded(value)
    except redis.ResponseError:
        pass
    try:
        conn.send_command("INFO", "memory", check_health=False)
        return policy_of_info(_decoded(conn.read_response()))
    except redis.ResponseError:
        return UNREADABLE


def policy_check(accepted: str | None, *, handshake: bool = True) -> Callable[[Any], None]:
    """redis-py's ``redis_connect_func``: the usual handshake (AUTH, SELECT, HELLO), then the
    policy; a refused one fails this connection with ``EvictingRedis``. ``handshake=False``
    for a cluster client, whose own connect hook has done it before it calls this one."""

    def on_connect(conn: Any) -> None:
        if handshake:
            # As redis-py's own connect does it: no health check (a PING) before AUTH, whose
            # NOAUTH would reconnect, and so call this hook again, for ever.
            conn.on_connect_check_health(check_health=False)
        policy = connection_policy(conn)
        if not acceptable(policy, accepted):
            where = f"{conn.host}:{conn.port}" if hasattr(conn, "port") else "its unix socket"
            raise EvictingRedis(refusal(policy, where, accepted))

    return on_connect


def refuse_evicting_redis(client: redis.Redis, url: str, accepted: str | None, gauge: Gauge) -> str:
    """Every role calls this at start: a policy nobody accepted stops the process with the
    sentence (``EvictingRedis``); an accepted one is logged as a warning and shown on
    ``gauge`` (``hbgw_redis_eviction_accepted``). Returns the policy read."""
    policy = read_policy(client)
    where = mask_url(url)
    if not acceptable(policy, accepted):
        raise EvictingRedis(refusal(policy, where, accepted))
    if policy != SAFE_POLICY:
        gauge.labels(policy).set(1)
        log.warning(
            "Redis at %s runs with maxmemory-policy %s, accepted by HBGW_REDIS_ACCEPT_EVICTION: "
            "evicted keys are rebuilt (docs/operations.md, the eviction policy), but heartbeats "
            "may fire late while it evicts; noeviction is the supported policy.",
            where,
            policy,
            extra={"action": "redis.eviction_accepted", "policy": policy},
        )
    return policy
