"""Issue 15, defect 2: a hung network must not let a worker send after its lock moved on.

A real in-process worker whose every Redis connection (state and Celery broker) goes through a
loopback TCP proxy; the proxy hangs (nothing forwarded, sockets kept open, no reset) while the
turn is in the agent. The lock runs out in Redis and a newer grant takes it; SQL has not heard
of that grant yet (its claim is still to come), so only Redis knows the lock moved on. The hung
turn must send nothing. Before the fix it did: a Redis error counted as "still ours", and the
liveness stamp before the send blocked for the 5 s socket timeout after the last check.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from support.harness import Gateway, gateway_settings, wait_until
from support.scenarios import send, started_run
from support.tcp_proxy import TcpProxy, tcp_proxy

from hbgw.core.clock import utcnow
from hbgw.core.errors import TurnAborted
from hbgw.gateway.inbound import Queued
from hbgw.sessions.states import LostLockDetail, RunState
from hbgw.sessions.views import Outbound
from hbgw.state.connection import connect
from hbgw.state.turn_gate import Began, TurnGate
from hbgw.workers.locks import LockKeeper
from hbgw.workers.runner import TurnRunner
from hbgw.workers.turn_io import REPEAT_MARK

NEWER = "newer-grant"


@contextmanager
def hung_worker(gw: Gateway, tmp_path: Path) -> Iterator[tuple[TurnRunner, TcpProxy]]:
    """Worker ``w1`` with its Redis path through a proxy; the proxy flows again on the way out
    (so the worker can stop), and the newer grant's lock is given back."""
    where = urlsplit(gw.redis_url)
    assert where.hostname is not None and where.port is not None
    with tcp_proxy(where.hostname, where.port) as proxy:
        proxied_url = where._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
        settings = gateway_settings(tmp_path, proxied_url, gw.settings.namespace)
        try:
            with gw.worker("w1", settings=settings) as runner:
                try:
                    yield runner, proxy
                finally:
                    proxy.resume()
        finally:
            proxy.resume()


def take_over_in_redis(gw: Gateway, sid: str) -> int:
    """The hung worker's lock runs out (observed on Redis, never slept) and a newer grant takes
    it, as a worker that outlived the hung one would; returns the newer fence."""
    wait_until(lambda: gw.rt.gate.lock_holder(sid) is None, what="the hung turn's lease to end")
    began = gw.rt.gate.try_begin_user(sid, NEWER, int(gw.settings.lock_lease * 1000))
    assert isinstance(began, Began)
    return began.fence


def in_the_agent(gw: Gateway, sid: str) -> None:
    """The turn's last stamp is the agent's step: everything before the agent (the claim, the
    message taken from the inbox) has talked to Redis already, so the hang meets the turn after
    the agent, where the checks before the send are."""
    wait_until(
        lambda: any(s.session == sid and s.phase.startswith("tool:") for s in gw.rt.liveness.all()),
        what="the turn to be in the agent",
    )


def aborted(caplog: pytest.LogCaptureFixture, sid: str) -> bool:
    return any(
        getattr(r, "action", None) == "turn.aborted" and getattr(r, "session", None) == sid
        for r in caplog.records
    )


def test_hung_user_turn_never_sends_after_its_lock_moved_on(
    gateway: Gateway, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hbgw")
    gw, release = gateway, tmp_path / "release"
    with hung_worker(gw, tmp_path) as (_, proxy):
        sid = gw.session()
        queued = send(gw, sid, f"HOLD {release} hello")
        assert isinstance(queued, Queued)
        in_the_agent(gw, sid)
        proxy.hang()
        release.touch()  # the agent answers; everything after it meets the hung network
        newer = take_over_in_redis(gw, sid)
        wait_until(
            lambda: gw.deliveries(sid, "send") or aborted(caplog, sid),
            what="the hung turn to send or to stop",
        )
        sends = gw.deliveries(sid, "send")
        gw.rt.gate.release(sid, NEWER)
    assert sends == [], f"the turn sent after its lock passed to fence {newer}: {sends}"
    assert gw.store.messages.reply_for(queued.message_id) is None


def test_hung_heartbeat_turn_never_sends_after_its_lock_moved_on(
    gateway: Gateway, tmp_path: Path
) -> None:
    gw, release = gateway, tmp_path / "release"
    with hung_worker(gw, tmp_path) as (_, proxy):
        sid = gw.session()
        gw.due_now(sid, prompt=f"HOLD {release} then report")
        gw.tick()
        started_run(gw, sid, "the heartbeat turn to start")
        in_the_agent(gw, sid)
        proxy.hang()
        release.touch()
        take_over_in_redis(gw, sid)
        [run] = gw.final_runs(sid)
        sends = gw.deliveries(sid, "send")
        gw.rt.gate.release(sid, NEWER)
    assert sends == []
    assert (run.state, run.detail) == (RunState.FAILED, LostLockDetail.BEFORE_DELIVERY)


def test_a_confirmation_is_good_for_a_third_of_the_lease(gateway: Gateway) -> None:
    """The last check before a send is in memory: a confirmation older than lease / 3 (on the
    monotonic clock) sends nothing, whatever delayed the turn since (a slow SQL write, a pause)."""
    gw, sid, now = gateway, gateway.session(), [100.0]
    assert isinstance(gw.rt.gate.try_begin_user(sid, "tok", 3000), Began)
    keeper = LockKeeper(gw.rt.gate, sid, "tok", 3000, monotonic=lambda: now[0])
    with pytest.raises(TurnAborted, match="never"):
        keeper.cleared()  # granted, never confirmed
    keeper.confirm()
    now[0] += 1.0
    keeper.cleared()  # exactly a third of the 3 s lease: still good
    now[0] += 0.01
    with pytest.raises(TurnAborted, match=r"longer than the 1\.00 s"):
        keeper.cleared()
    keeper.confirm()
    keeper.cleared()


def test_a_redis_that_does_not_answer_confirms_nothing(gateway: Gateway) -> None:
    """Defect: a Redis error at the confirmation counted as "the lock is still ours"."""
    gw, sid = gateway, gateway.session()
    assert isinstance(gw.rt.gate.try_begin_user(sid, "tok", 3000), Began)
    where = urlsplit(gw.redis_url)
    assert where.hostname is not None and where.port is not None
    with tcp_proxy(where.hostname, where.port) as proxy:
        url = where._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
        client = connect(url, lock_lease=1)  # a quarter lease: the floor, 0.25 s
        try:
            gate = TurnGate(client, gw.rt.keys)
            keeper = LockKeeper(gate, sid, "tok", 3000)
            keeper.confirm()
            proxy.hang()
            started = time.monotonic()
            with pytest.raises(TurnAborted, match="Could not confirm"):
                keeper.confirm()
            assert time.monotonic() - started < 3  # the socket timeout, not the lease, ended it
        finally:
            proxy.resume()
            client.close()


def test_a_reply_an_older_grant_may_have_sent_is_marked_and_keyed(gateway: Gateway) -> None:
    """The known hole: a turn paused between its last check and the send delivers late, and
    the next grant answers too. A chat platform cannot drop the repeat, so the second reply
    says it may be one, and carries the same delivery key as the first would have."""
    gw = gateway
    sid = gw.session()
    queued = send(gw, sid, "hello")
    assert isinstance(queued, Queued)
    # An older grant got as far as its durable mark, then vanished (paused, cut off).
    older = gw.rt.gate.try_begin_user(sid, "older", int(gw.settings.lock_lease * 1000))
    assert isinstance(older, Began)
    gw.store.ledger.claim_fence(sid, older.fence, utcnow())
    reply = [Outbound(f"msg:{queued.message_id}", "reply")]
    start = gw.store.ledger.begin_reply(
        sid,
        gw.store.messages.message_turn(queued.message_id, sid, history=0).message.key,
        older.fence,
        utcnow(),
        channel="file",
        outbound=reply,
    )
    assert start is not None and not start.possible_repeat
    gw.rt.gate.release(sid, "older")
    with gw.worker("w1") as runner:
        runner.drain(sid)
        reply = wait_until(lambda: gw.store.messages.reply_for(queued.message_id), what="the reply")
        fresh = send(gw, sid, "again")
        assert isinstance(fresh, Queued)
        wait_until(lambda: gw.store.messages.reply_for(fresh.message_id), what="the second reply")
        gw.due_now(sid)
        gw.tick()
        [run] = gw.final_runs(sid)
    repeat, second, beat = gw.deliveries(sid, "send")
    assert (repeat["delivery_key"], repeat["repeat"]) == (f"msg:{queued.message_id}", True)
    assert repeat["text"] == reply.text == REPEAT_MARK + "user reply to: hello"
    assert (second["delivery_key"], second["repeat"]) == (f"msg:{fresh.message_id}", False)
    assert second["text"] == "user reply to: again"
    assert (beat["delivery_key"], beat["ref"], beat["repeat"]) == (run.fire_id, run.fire_id, False)
