"""An emergency stop, as the operator and the user meet it: send and status name the stop."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from support.cli_fixtures import Hbgw
from support.harness import wait_until

from hbgw.core.clock import utcnow
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.states import MessageState
from hbgw.sessions.store import Store
from hbgw.state.keys import Keys

HELD = 3  # `hbgw send`: the message is queued, an emergency stop holds it


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.from_url(f"sqlite:///{tmp_path / 'hbgw.sqlite3'}")
    yield store
    store.close()


@pytest.fixture
def deployment(hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch, redis_url: str, redis_ns: str) -> Keys:
    """A reachable Redis and no worker: nothing would ever answer."""
    monkeypatch.setenv("HBGW_REDIS_URL", redis_url)
    monkeypatch.setenv("HBGW_NAMESPACE", redis_ns)
    return Keys(redis_ns)


def _session(hbgw: Hbgw) -> str:
    return hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()


@pytest.mark.parametrize("scope", ["global", "session"])
def test_send_during_a_stop_says_the_stop_at_once(
    hbgw: Hbgw, deployment: Keys, store: Store, scope: str
) -> None:
    sid = _session(hbgw)
    hbgw("estop", "on", *(["--session", sid] if scope == "session" else []))
    result = hbgw("send", sid, "hello", "--timeout", "30")
    assert result.code == HELD, result
    assert result.out.startswith("Message 1 queued for session ")
    assert "an emergency stop holds it" in result.out
    lift = "hbgw estop off" + (f" --session {sid}" if scope == "session" else "")
    assert f"`{lift}`" in result.out
    # Accepted: it runs once lifted.
    assert store.messages.message_turn(1, sid, history=0).message.state == MessageState.QUEUED
    no_wait = hbgw("send", sid, "again", "--no-wait")
    assert no_wait.code == 0 and "an emergency stop holds it" in no_wait.out


def test_a_stop_switched_on_while_send_waits_ends_the_wait(
    hbgw: Hbgw, deployment: Keys, redis_client: redis.Redis
) -> None:
    sid = _session(hbgw)

    def stop_once_queued() -> None:
        wait_until(lambda: redis_client.llen(deployment.inbox(sid)), 30, "the message queued")
        redis_client.set(deployment.estop(), "1")

    switch = threading.Thread(target=stop_once_queued)
    switch.start()
    result = hbgw("send", sid, "hello", "--timeout", "60")
    switch.join()
    assert result.code == HELD, result
    assert "an emergency stop holds it" in result.out


def test_heartbeat_status_says_the_stop(hbgw: Hbgw, deployment: Keys, store: Store) -> None:
    sid = _session(hbgw)
    store.heartbeats.set_heartbeat(
        sid,
        schedule=IntervalSchedule(600),
        schedule_text="every 10m",
        prompt="check CI",
        now=utcnow() - timedelta(hours=1),
    )
    assert "due now — a worker takes it at beat's next tick" in hbgw("heartbeat", "status", sid).out
    assert json.loads(hbgw("heartbeat", "status", sid, "--json").out)["waiting_for_idle"] is False
    hbgw("estop", "on", "--session", sid)
    for shown in (hbgw("heartbeat", "status", sid).out, hbgw("send", sid, "/heartbeat").out):
        assert "waiting for the session to go idle" not in shown
        assert "held by an emergency stop" in shown, shown
        assert shown.startswith("♥ Heartbeat (every 10m): check CI — ")
    status = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
    assert status["emergency_stop"] is True
    hbgw("estop", "off", "--session", sid)
    assert json.loads(hbgw("heartbeat", "status", sid, "--json").out)["emergency_stop"] is False


def test_waiting_for_idle_only_while_a_turn_holds_the_session(
    hbgw: Hbgw, deployment: Keys, store: Store, redis_url: str
) -> None:
    sid = _session(hbgw)
    store.heartbeats.set_heartbeat(
        sid,
        schedule=IntervalSchedule(600),
        schedule_text="every 10m",
        prompt="check CI",
        now=utcnow() - timedelta(hours=1),
    )
    client = redis.Redis.from_url(redis_url)
    try:
        client.set(deployment.lock(sid), "a-running-turn", px=60_000)  # what a turn holds
        status = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
        assert (status["due_now"], status["waiting_for_idle"]) == (True, True)
        assert "due — waiting for the session to go idle" in hbgw("heartbeat", "status", sid).out
        client.delete(deployment.lock(sid))
        status = json.loads(hbgw("heartbeat", "status", sid, "--json").out)
        assert (status["due_now"], status["waiting_for_idle"]) == (True, False)
    finally:
        client.delete(deployment.lock(sid))
        client.close()
