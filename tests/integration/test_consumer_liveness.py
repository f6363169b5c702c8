"""Issue 15, defect 1: a worker counts as live only while its consumer really consumes.

The registry entry is refreshed from its own thread; refreshed regardless, a worker whose
Celery consumer could not consume stayed live and beat routed its sessions' fires to a queue
nobody read. Here the consumer's own connection is cut while the rest of Redis keeps working
for the worker (its registry thread included): the worker must drop out of the live set within
about one worker TTL, and come back once its consumer consumes again.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis
from celery.worker.consumer import Consumer
from support.harness import Gateway, gateway_settings, wait_until
from support.private_redis import running_redis

from hbgw.celery_app import make_celery
from hbgw.consumer import ResilientConsumer
from hbgw.core.settings import Settings
from hbgw.state.consumer_progress import STARTUP_GRACE, ConsumerProgress
from hbgw.state.keys import Keys
from hbgw.state.ownership import RegistryHeartbeat, WorkerRegistry

TTL = 3.0  # seconds, the harness's worker TTL


def _consumer_connections(admin: redis.Redis) -> list[str]:
    """Client ids of the connections blocked in (or last running) the consumer's BRPOP."""
    return [str(c["id"]) for c in admin.client_list() if c.get("cmd") == "brpop"]


def _cut_the_consumer_off(admin: redis.Redis) -> None:
    """New connections are refused (``maxclients`` below the count) and the consumer's are
    closed: it cannot reconnect, while every connection the worker already holds answers."""
    admin.config_set("maxclients", 1)
    for client_id in _consumer_connections(admin):
        admin.client_kill_filter(_id=client_id)


@pytest.mark.timeout(120)
def test_a_worker_whose_consumer_cannot_consume_leaves_the_live_set(
    tmp_path: Path, redis_ns: str
) -> None:
    with running_redis(tmp_path / "redis") as server:
        gw = Gateway(gateway_settings(tmp_path, server.url, redis_ns, agent="echo"), server.url)
        admin = server.client()
        admin.ping()  # its connection is made now, before new ones are refused
        live = gw.rt.registry.live
        try:
            with gw.worker("w1"):
                wait_until(lambda: _consumer_connections(admin), 30, "the consumer's BRPOP")
                assert live(gw.rt.now_ms()) == ["w1"]
                _cut_the_consumer_off(admin)
                cut = time.monotonic()
                wait_until(lambda: live(gw.rt.now_ms()) == [], 4 * TTL, "w1 to leave")
                left_after = time.monotonic() - cut
                admin.config_set("maxclients", 10000)
                wait_until(lambda: live(gw.rt.now_ms()) == ["w1"], 60, "w1 live again")
        finally:
            admin.close()
            gw.close()
    print(f"w1 left the live set {left_after:.1f}s after its consumer was cut off")
    # One TTL for the entry to expire, plus a refresh period and the machine's delays.
    assert left_after <= 2 * TTL, left_after


def test_the_registry_refresh_follows_the_consumer(
    redis_client: redis.Redis, redis_ns: str
) -> None:
    registry = WorkerRegistry(redis_client, Keys(redis_ns), ttl_ms=int(TTL * 1000))
    progress = ConsumerProgress(born=0.0)
    now = [STARTUP_GRACE + 10.0]  # monotonic seconds, moved by the test
    heartbeat = RegistryHeartbeat(
        registry,
        "w1",
        lambda: int(now[0] * 1000),
        every=60,
        consuming=lambda: progress.consuming(now[0], 6.0),
    )
    heartbeat._refresh()
    assert registry.live(int(now[0] * 1000)) == [], "past its start-up grace, never connected"
    progress.connected(now[0], ticks=True)
    heartbeat._refresh()
    assert registry.live(int(now[0] * 1000)) == ["w1"]
    now[0] += 5.0
    heartbeat._refresh()  # the loop passed 5 s ago: still consuming
    assert registry.live(int(now[0] * 1000)) == ["w1"]
    now[0] += 2.0
    heartbeat._refresh()  # 7 s without a pass: a hung loop, not refreshed
    now[0] += TTL - 1.0
    assert registry.live(int(now[0] * 1000)) == []
    progress.passed(now[0])
    heartbeat._refresh()
    assert registry.live(int(now[0] * 1000)) == ["w1"]
    progress.lost()
    assert not progress.consuming(now[0], 6.0)


def test_a_starting_worker_counts_as_consuming_for_a_bounded_time() -> None:
    progress = ConsumerProgress(born=100.0)
    assert progress.consuming(100.0 + STARTUP_GRACE, 6.0)
    assert not progress.consuming(100.0 + STARTUP_GRACE + 0.1, 6.0)
    progress.connected(200.0, ticks=False)  # a consumer without an event loop: connected is all
    assert progress.consuming(10_000.0, 6.0)


def test_a_cleanup_that_kombu_cannot_finish_does_not_stop_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seen in a chaos run (``redis_hang`` then a restart): Celery's cleanup after a lost
    connection reached kombu's channel close with no connection info left and raised
    ``AttributeError: 'NoneType' object has no attribute 'hostname'``, which Celery calls
    unrecoverable: the worker exited. The consumer now logs it and restarts as for any loss."""

    def kombu_gives_up(self: object, exc: BaseException) -> None:
        raise AttributeError("'NoneType' object has no attribute 'hostname'")

    monkeypatch.setattr(Consumer, "on_connection_error_after_connected", kombu_gives_up)
    monkeypatch.setattr("hbgw.consumer.FIRST_DELAY", 0.0)
    consumer = ResilientConsumer.__new__(ResilientConsumer)
    consumer.app = make_celery(Settings(), "redis://127.0.0.1:1/0")
    consumer.connection = object()  # type: ignore[assignment]  # any broken connection
    consumer.connection_errors = (ConnectionError,)
    consumer._delay, consumer._last_error, consumer._connected_since_error = 0.0, 0.0, True
    consumer._progress = ConsumerProgress(born=time.monotonic())
    consumer.on_connection_error_after_connected(ConnectionError("Connection closed by server."))
    assert consumer.connection is None
