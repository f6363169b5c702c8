"""Issue 16 (model latency): a worker renews every lock it holds in one round trip a period.

A thread and a renewal of its own per lock doubled a worker's threads and Redis round trips;
with slow model calls one worker holds hundreds of turns at once. Real Redis, real locks.
"""

from __future__ import annotations

import threading
from typing import Any

import redis
from support.harness import Gateway

from hbgw.state.turn_gate import Began, TurnGate
from hbgw.workers.locks import LockKeeper, LockRenewals

LEASE_MS = 3000
TURNS = 50


class CountingRedis(redis.Redis):
    """Counts the pipelines this client sends: each ``execute`` is one round trip."""

    executed = 0

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        pipe = super().pipeline(*args, **kwargs)
        send = pipe.execute

        def execute(*a: Any, **kw: Any) -> Any:
            CountingRedis.executed += 1
            return send(*a, **kw)

        pipe.execute = execute  # type: ignore[method-assign]
        return pipe


def _granted(gw: Gateway, count: int) -> list[str]:
    sids = [gw.session(chat=f"C{i}") for i in range(count)]
    for sid in sids:
        assert isinstance(gw.rt.gate.try_begin_user(sid, f"tok-{sid}", LEASE_MS), Began)
    return sids


def test_every_held_lock_is_renewed_in_one_round_trip(gateway: Gateway) -> None:
    gw = gateway
    sids = _granted(gw, TURNS)
    client = CountingRedis.from_url(gw.redis_url)
    gate = TurnGate(client, gw.rt.keys)
    now = [100.0]
    renewals = LockRenewals(gate, LEASE_MS, monotonic=lambda: now[0])
    keepers = [
        LockKeeper(gate, sid, f"tok-{sid}", LEASE_MS, renewals=renewals, monotonic=lambda: now[0])
        for sid in sids
    ]
    # Another grant took the first session's lock: that turn alone learns it lost it.
    gw.rt.gate.release(sids[0], f"tok-{sids[0]}")
    assert isinstance(gw.rt.gate.try_begin_user(sids[0], "newer", LEASE_MS), Began)
    for sid in sids[1:]:
        gw.rt.gate.client.pexpire(gw.rt.keys.lock(sid), 500)  # nearly run out
    try:
        for keeper in keepers:
            keeper.__enter__()
        assert renewals.held() == TURNS
        CountingRedis.executed = 0
        renewals.renew_all()
        assert CountingRedis.executed == 1
        assert keepers[0].lost.is_set()
        assert renewals.held() == TURNS - 1
        for sid, keeper in zip(sids[1:], keepers[1:], strict=True):
            assert gw.rt.gate.client.pttl(gw.rt.keys.lock(sid)) > 500
            assert not keeper.lost.is_set()
            keeper.cleared()  # the shared renewal counts as a confirmation
    finally:
        for keeper in keepers:
            keeper.__exit__(None, None, None)
        renewals.close()
        client.close()
    assert renewals.held() == 0


def test_one_renewal_thread_whatever_the_number_of_turns(gateway: Gateway) -> None:
    gw = gateway
    sids = _granted(gw, TURNS)
    renewals = LockRenewals(gw.rt.gate, LEASE_MS)
    keepers = [
        LockKeeper(gw.rt.gate, sid, f"tok-{sid}", LEASE_MS, renewals=renewals) for sid in sids
    ]
    try:
        for keeper in keepers:
            keeper.__enter__()
        names = [t.name for t in threading.enumerate()]
        assert names.count("hbgw-locks") == 1
        assert "hbgw-lock" not in names
    finally:
        for keeper in keepers:
            keeper.__exit__(None, None, None)
        renewals.close()
    assert "hbgw-locks" not in [t.name for t in threading.enumerate() if t.is_alive()]


def test_stamps_a_turn_held_ride_on_the_renewal(gateway: Gateway) -> None:
    """A step of the agent holds its liveness stamp for the turn's next round trip; a model
    call longer than a renewal period still shows it, sent with the renewal."""
    gw = gateway
    [sid] = _granted(gw, 1)
    client = CountingRedis.from_url(gw.redis_url)
    gate = TurnGate(client, gw.rt.keys)
    renewals = LockRenewals(gate, LEASE_MS)
    keeper = LockKeeper(gate, sid, f"tok-{sid}", LEASE_MS, renewals=renewals)
    with keeper:
        keeper.hold(
            lambda pipe: gw.rt.liveness.stamp(sid, 7, "thinking", "w1", pipe=pipe),
            restore=lambda pipe: gw.rt.liveness.stamp(
                sid, 7, "thinking", "w1", pipe=pipe, missing_only=True
            ),
        )
        assert [s for s in gw.rt.liveness.all() if s.session == sid] == []  # held, not sent
        sent = CountingRedis.executed
        renewals.renew_all()
        assert CountingRedis.executed == sent + 1  # the stamp went with the renewal
        [stamp] = [s for s in gw.rt.liveness.all() if s.session == sid]
        assert (stamp.phase, stamp.at_ms) == ("thinking", 7)
        assert keeper.take_held() is None  # sent once: the turn's next round trip has none
    renewals.close()
