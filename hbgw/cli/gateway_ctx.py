"""The CLI as a gateway edge: the store, plus Redis and Celery when a deployment is reachable.

Redis and Celery are imported inside the functions: commands import this module to call
``sync_index``, and `hbgw --help` must not load them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias

from hbgw.cli.common import open_store, settings
from hbgw.core.errors import HbgwError

if TYPE_CHECKING:
    import redis

    from hbgw.core.settings_quick import RedisSettings
    from hbgw.sessions.store import Store
    from hbgw.sessions.store.message_records import MessageRecords
    from hbgw.sessions.views import MessageView
    from hbgw.state.dispatch import Dispatcher
    from hbgw.state.redis_part import RedisPart
    from hbgw.state.resp_quick import QuickRedis
    from hbgw.state.runtime import Runtime

    StateRedis: TypeAlias = QuickRedis | redis.Redis


@contextmanager
def gateway_runtime() -> Iterator[tuple[Store, Runtime | None, Dispatcher | None]]:
    """The store, plus Redis and a dispatcher when a deployment answers (else None, None)."""
    from hbgw.celery_app import make_celery
    from hbgw.state.dispatch import Dispatcher
    from hbgw.state.runtime import Runtime, resolve_redis_url

    s = settings()
    store = open_store()
    client = reachable_redis(s)
    if client is None:
        try:
            yield store, None, None
        finally:
            store.close()
        return
    from hbgw.state.shared_clock import shared_clock

    rt = Runtime(settings=s, store=store, client=client, clock=shared_clock(client, s))
    try:
        yield store, rt, Dispatcher(make_celery(s, resolve_redis_url(s)), rt.keys)
    finally:
        rt.close()


def reachable_redis(s: RedisSettings) -> redis.Redis | None:
    from hbgw.state.redis_url import resolve_redis_url

    try:
        url = resolve_redis_url(s)  # no Redis named: redis-py is not even imported
    except HbgwError:
        return None
    import redis

    from hbgw.state.connection import connect

    try:
        client = connect(url, s)
    except HbgwError:
        return None
    try:
        client.ping()
    except redis.RedisError:
        client.close()
        return None
    return client


def wait_for_reply(
    messages: MessageRecords,
    message_id: int,
    timeout: float,
    *,
    held: Callable[[], bool] = lambda: False,
) -> MessageView | None:
    """The reply, or None after ``timeout`` or as soon as ``held()`` (an emergency stop) says so."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = messages.reply_for(message_id)
        if reply is not None or held():
            return reply
        time.sleep(0.1)
    return None


def estop_lift(redis: RedisPart, session_id: str) -> str | None:
    """The command that lifts the emergency stop holding ``session_id``; None when none does."""
    from hbgw.state.turn_gate import TurnGate

    global_stop, session_stop = TurnGate(redis.client, redis.keys).estops(session_id)
    if global_stop:
        return "hbgw estop off"
    if session_stop:
        return f"hbgw estop off --session {session_id}"
    return None


@contextmanager
def state_redis(s: RedisSettings) -> Iterator[StateRedis | None]:
    """The deployment's Redis for `hbgw stamp`: the quick client (``state.resp_quick``) when it
    reads the URL, else redis-py's (a cluster, Sentinel); None when no Redis answers, as
    ``reachable_redis`` says it (a URL that does not verify, a refused connection, an error)."""
    from hbgw.state.redis_url import resolve_redis_url
    from hbgw.state.resp_quick import NotQuick, QuickRedisError, connect_quick

    try:
        url = resolve_redis_url(s)
        client: StateRedis | None = connect_quick(url, s)
    except NotQuick:
        client = reachable_redis(s)
    except (HbgwError, OSError, QuickRedisError):
        client = None
    try:
        yield client
    finally:
        if client is not None:
            client.close()


def ask(client: StateRedis, commands: Sequence[tuple[str, ...]]) -> list[Any]:
    """``commands`` sent together, their answers in order, on either client."""
    from hbgw.state.resp_quick import QuickRedis

    if isinstance(client, QuickRedis):
        return client.send_all(commands)
    pipe = client.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)  # type: ignore[no-untyped-call]
    return pipe.execute()


def held_sentence(message_id: int, session_id: str, lift: str) -> str:
    return (
        f"Message {message_id} queued for session {session_id}; an emergency stop holds it — "
        f"it runs once `{lift}` lifts the stop."
    )


def sync_index(session_id: str) -> None:
    """After a heartbeat change from the CLI, tell the due index (when Redis is reachable)."""
    with gateway_runtime() as (_store, rt, _dispatcher):
        if rt is not None:
            rt.due.settle(session_id)
