"""Issue 15, defect 1: a worker recovers from every one of many Redis restarts in a row.

A real `hbgw worker` and a real `hbgw beat` run on a Redis of the test's own, which is stopped
and started again (empty) several times. After each restart the test measures how long until
every session's heartbeat fired again and a user message sent through the real dispatcher is
answered. Before the fix, the worker's Celery consumer reconnected on a connection left over
from before the restart, lost it at once, backed off for longer each time, and the worker
stayed registered as live while nobody read its queue.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from subprocess import Popen

import pytest
import redis
from kombu.exceptions import OperationalError
from support.harness import Gateway, gateway_settings, wait_until
from support.private_redis import PrivateRedis, running_redis
from support.scenarios import send

from hbgw.core.clock import utcnow
from hbgw.gateway.inbound import Queued
from hbgw.procs import spawn_hbgw, stop_all
from hbgw.sessions.states import REACHED_AGENT

pytestmark = pytest.mark.timeout(420)

RESTARTS = 10
SESSIONS = 4
RECOVERY_BOUND = 10.0  # seconds a restart, the bound
# Waits end here, past the bound, so a slow recovery is measured rather than cut off.
RECOVERY_DEADLINE = 20.0


@contextmanager
def deployment(gw: Gateway, tmp_path: Path) -> Iterator[list[Popen[bytes]]]:
    # With the tracebacks of broker errors in the logs: what a failure here needs to be read.
    env = {**gw.env(), "HBGW_DEBUG": "1"}
    procs = [
        spawn_hbgw(["worker", "--name", "w1"], env=env, log=tmp_path / "worker.log"),
        spawn_hbgw(["beat"], env=env, log=tmp_path / "beat.log"),
    ]
    try:
        yield procs
    finally:
        stop_all(procs, timeout=20)


def fired_since(gw: Gateway, sessions: list[str], since: datetime) -> bool:
    fired = {r.session_id for r in gw.runs() if r.state in REACHED_AGENT and r.reserved_at >= since}
    return fired.issuperset(sessions)


def answered(gw: Gateway, sid: str, message_id: int) -> bool:
    return any(m.reply_to == message_id for m in gw.store.messages.list_messages(sid))


def restart(server: PrivateRedis) -> None:
    server.stop()
    server.start()


def recovery_after_restart(gw: Gateway, server: PrivateRedis, sessions: list[str]) -> float:
    """Seconds from Redis answering again until every heartbeat fired and a message was
    answered."""
    restart(server)
    began, since = time.monotonic(), utcnow()
    queued = wait_until(lambda: _sent(gw, sessions[0]), RECOVERY_DEADLINE, "the message accepted")
    wait_until(
        lambda: fired_since(gw, sessions, since) and answered(gw, sessions[0], queued.message_id),
        RECOVERY_DEADLINE,
        "every heartbeat to fire and the message to be answered after the restart",
    )
    took = time.monotonic() - began
    # Settled before the next restart: every heartbeat fires once more.
    again = utcnow()
    wait_until(lambda: fired_since(gw, sessions, again), RECOVERY_DEADLINE, "the next fires")
    return took


def _sent(gw: Gateway, sid: str) -> Queued | None:
    """A user message through the real accept path and dispatcher (it may need a retry while
    the test's own connections find the new server)."""
    try:
        result = send(gw, sid, f"hello at {time.monotonic():.3f}")
    except (redis.RedisError, OperationalError):  # the restart, not the test's subject
        return None
    assert isinstance(result, Queued), result
    return result


@dataclass
class Fleet:
    server: PrivateRedis
    gw: Gateway
    sessions: list[str]
    procs: list[Popen[bytes]]


@contextmanager
def firing(tmp_path: Path, redis_ns: str) -> Iterator[Fleet]:
    """A private Redis, SESSIONS heartbeats due every second, a worker and a beat: inside,
    every heartbeat has fired once."""
    with running_redis(tmp_path / "redis") as server:
        gw = Gateway(gateway_settings(tmp_path, server.url, redis_ns, agent="echo"), server.url)
        sessions = [gw.session(chat=f"C{i}") for i in range(SESSIONS)]
        for sid in sessions:
            gw.due_now(sid, seconds=1)
        try:
            with deployment(gw, tmp_path) as procs:
                started = utcnow()
                wait_until(lambda: fired_since(gw, sessions, started), 60, "the first fires")
                yield Fleet(server, gw, sessions, procs)
        finally:
            gw.close()


def test_every_one_of_many_redis_restarts_is_recovered_quickly(
    tmp_path: Path, redis_ns: str
) -> None:
    with firing(tmp_path, redis_ns) as fleet:
        times: list[float] = []
        for _ in range(RESTARTS):
            times.append(recovery_after_restart(fleet.gw, fleet.server, fleet.sessions))
        assert all(p.poll() is None for p in fleet.procs)
    print("recovery after each restart (s):", [round(t, 1) for t in times])
    # One reconnect per restart (and the first connect): a consumer that dies right after
    # "Connected" reconnects again and again — 65 times for 10 restarts with the stale
    # connections left open, while the recoveries still looked fast at first.
    connects = (tmp_path / "worker.log").read_text().count("Connected to redis")
    assert connects <= RESTARTS + 3, connects
    # The bound, and not growing: the last restarts recover about as fast as the first
    # ones (loosely: the machine is shared). Before the fix: 1.8 s, 15 s, then never; with the
    # broken connection closed but the back-off kept growing: 2.3 s ... 11 s.
    assert max(times) <= RECOVERY_BOUND, times
    assert max(times[-3:]) <= max(times[:3]) * 2 + 3, times


# Down this long, Celery's own connect retries (after 2, 4, 6, 8 s: at 0, 2, 6, 12, 20 s) would
# next try about 7 s after Redis is back.
LONG_OUTAGE = 13.0
LONG_OUTAGE_BOUND = 5.0


def test_after_a_long_outage_the_worker_consumes_again_within_seconds(
    tmp_path: Path, redis_ns: str
) -> None:
    with firing(tmp_path, redis_ns) as fleet:
        fleet.server.stop()
        time.sleep(LONG_OUTAGE)  # the fault itself: Redis stays away this long
        fleet.server.start()
        began, since = time.monotonic(), utcnow()
        wait_until(lambda: fired_since(fleet.gw, fleet.sessions, since), 30, "fires after it")
        took = time.monotonic() - began
    print(f"recovery after a {LONG_OUTAGE:.0f}s outage: {took:.1f}s")
    assert took <= LONG_OUTAGE_BOUND, took
