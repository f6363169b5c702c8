"""The CLI as a gateway edge: the store, plus Redis and Celery when a deployment is reachable.

Redis and Celery are imported inside the functions: commands import this module to call
``sync_index``, and `hbgw --help` must not load them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from hbgw.cli.common import open_store, settings, store_settings
from hbgw.core.errors import HbgwError

if TYPE_CHECKING:
    import redis

    from hbgw.core.settings_quick import StoreSettings
    from hbgw.sessions.store import Store
    from hbgw.sessions.views import MessageView
    from hbgw.state.dispatch import Dispatcher
    from hbgw.state.keys import Keys
    from hbgw.state.runtime import Runtime


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


def reachable_redis(s: StoreSettings) -> redis.Redis | None:
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
    store: Store, message_id: int, timeout: float, *, held: Callable[[], bool] = lambda: False
) -> MessageView | None:
    """The reply, or None after ``timeout`` or as soon as ``held()`` (an emergency stop) says so."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = store.messages.reply_for(message_id)
        if reply is not None or held():
            return reply
        time.sleep(0.1)
    return None


def estop_lift(rt: Runtime, session_id: str) -> str | None:
    """The command that lifts the emergency stop holding ``session_id``; None when none does."""
    return _lift(rt.client, rt.keys, session_id)


def stop_and_busy(session_id: str) -> tuple[bool | None, bool | None]:
    """Whether an emergency stop holds the session, and whether a turn does (or messages wait
    for one); None for both when no Redis answers (unknown)."""
    s = store_settings()
    client = reachable_redis(s)
    if client is None:
        return None, None
    from hbgw.state.keys import Keys
    from hbgw.state.turn_gate import TurnGate

    try:
        keys = Keys(s.namespace)
        return _lift(client, keys, session_id) is not None, not TurnGate(client, keys).is_idle(
            session_id
        )
    finally:
        client.close()


def _lift(client: redis.Redis, keys: Keys, session_id: str) -> str | None:
    if client.exists(keys.estop()):
        return "hbgw estop off"
    if client.exists(keys.estop(session_id)):
        return f"hbgw estop off --session {session_id}"
    return None


def held_sentence(message_id: int, session_id: str, lift: str) -> str:
    return (
        f"Message {message_id} queued for session {session_id}; an emergency stop holds it — "
        f"it runs once `{lift}` lifts the stop."
    )


def sync_index(session_id: str) -> None:
    """After a heartbeat change from the CLI, tell the due index (when Redis is reachable)."""
    with gateway_runtime() as (_store, rt, _dispatcher):
        if rt is not None:
            rt.settle(session_id)
