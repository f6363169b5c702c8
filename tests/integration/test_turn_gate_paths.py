"""The turn gate's edges on a real server: a turn that lost its lock still leaves what it owes,
a Redis that lost its scripts (restarted) still grants, a drain granted under the global
emergency stop gives its lock back, and a renewal a demoted primary refuses confirms nothing."""

from __future__ import annotations

import logging

import pytest
import redis
from support.harness import wait_until
from support.private_redis import PrivateRedis, _free_port

from hbgw.state.connection import connect
from hbgw.state.keys import Keys
from hbgw.state.turn_gate import (
    Began,
    Busy,
    Kept,
    LockLost,
    NextMessage,
    Stopped,
    TurnEnded,
    TurnGate,
)
from hbgw.workers.turn_redis import log_after

SID = "sess-1"
TOKEN = "tok-a"
OTHER = "tok-b"
LOCK_MS = 30_000


@pytest.fixture
def gate(redis_client: redis.Redis, keys: Keys) -> TurnGate:
    return TurnGate(redis_client, keys)


def answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


# -- a turn that lost its lock ------------------------------------------------------------------


def test_a_turn_that_lost_its_lock_still_acks_its_answer_and_leaves_its_due_time(
    gate: TurnGate, redis_client: redis.Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    """The lock lapsed after the turn answered: its due time and the ack of the message it
    answered still go (one round trip); a command of theirs that fails is logged, not raised."""
    gate.enqueue_user(SID, "m1")
    began = gate.try_begin_drain(SID, TOKEN, LOCK_MS)
    assert isinstance(began, Began) and began.first == NextMessage("m1")
    redis_client.delete(keys.lock(SID))  # its lease lapsed: the turn lost its lock
    shard = keys.due_shard(0)

    def left(pipe: redis.client.Pipeline) -> None:
        pipe.zadd(shard, {SID: 1234})
        pipe.lpush(keys.fence(SID), "x")  # the fence is a string: WRONGTYPE

    with caplog.at_level(logging.INFO, logger="hbgw.runner"):
        errors = gate.leave(SID, "m1", left)
        log_after(SID, errors)
    assert [type(e) for e in errors] == [redis.ResponseError]
    assert redis_client.zscore(shard, SID) == 1234
    assert gate.backlog(SID) == 0  # m1 answered: acknowledged, not handed out again
    assert gate.lock_holder(SID) is None  # nothing taken back under a lock it lost
    [record] = [r for r in caplog.records if getattr(r, "action", "") == "turn.after_finish"]
    assert "WRONGTYPE" in record.getMessage()


def test_a_turn_that_lost_its_lock_with_nothing_left_sends_nothing_it_does_not_owe(
    gate: TurnGate,
) -> None:
    gate.enqueue_user(SID, "m1")
    gate.try_begin_drain(SID, TOKEN, LOCK_MS)  # m1 taken, not answered
    assert gate.leave(SID, None, None) == []
    assert gate.backlog(SID) == 1  # unanswered: it stays in flight for the next grant


# -- a Redis that lost its scripts --------------------------------------------------------------


def test_a_restarted_redis_still_grants_a_fire_with_its_reads_and_a_drain_with_its_step(
    private_redis: PrivateRedis,
) -> None:
    """A restart forgets every loaded script: the begins sent by sha meet NOSCRIPT and load
    theirs, and answer as before (the reads with the lock, the drain's first step)."""
    private_redis.start()
    client = connect(private_redis.url)
    try:
        keys = Keys("restart")
        gate = TurnGate(client, keys)
        gate.load_scripts()
        private_redis.stop()
        private_redis.start()
        wait_until(lambda: answers(client), timeout=10, what="the restarted Redis")
        assert client.script_exists(gate._try_begin.sha) == [False]
        client.set(keys.estop(SID), "1")

        def reads(pipe: redis.client.Pipeline) -> None:
            pipe.exists(keys.estop(SID))

        began, read = gate.try_begin_fire_reading(SID, "f1", TOKEN, LOCK_MS, reads)
        assert began == Began(fence=1) and read == [1]
        gate.release(SID, TOKEN)
        client.delete(keys.estop(SID))
        client.script_flush()  # restarted again before the drain
        gate.enqueue_user(SID, "m1")
        drained = gate.try_begin_drain(SID, OTHER, LOCK_MS)
        assert drained == Began(fence=2, first=NextMessage("m1"))
    finally:
        client.close()


# -- the global emergency stop at a drain's grant -----------------------------------------------


def test_a_drain_granted_under_the_global_stop_puts_its_message_back_and_frees_the_lock(
    gate: TurnGate,
) -> None:
    gate.enqueue_user(SID, "m1")
    gate.enqueue_user(SID, "m2")
    gate.set_estop(True)
    try:
        assert gate.try_begin_drain(SID, TOKEN, LOCK_MS) == Began(fence=1, first=Stopped())
        assert gate.lock_holder(SID) is None
        assert gate.pop_message(SID) == "m1"  # back at the head, the order kept
    finally:
        gate.set_estop(False)


def test_a_drain_granted_under_the_global_stop_with_an_empty_inbox_frees_the_lock(
    gate: TurnGate,
) -> None:
    gate.set_estop(True)
    try:
        assert gate.try_begin_drain(SID, TOKEN, LOCK_MS) == Began(fence=1, first=Stopped())
        assert gate.lock_holder(SID) is None and gate.backlog(SID) == 0
    finally:
        gate.set_estop(False)
    began = gate.try_begin_drain(SID, TOKEN, LOCK_MS)  # after the stop: kept, as always
    assert isinstance(began, Began) and began.first == Kept()


def test_a_turn_the_step_ended_stays_ended_under_the_global_stop(gate: TurnGate) -> None:
    """Its pending fire goes on to admission, whose re-check refunds it under the stop; a
    stale holder's step changes nothing either."""
    assert isinstance(gate.try_begin_user(SID, TOKEN, LOCK_MS), Began)
    assert gate.try_begin_fire(SID, "f9", OTHER, LOCK_MS) == Busy("busy")
    gate.set_estop(True)
    try:
        assert gate.next_step(SID, OTHER, LOCK_MS)[0] == LockLost()
        assert gate.next_step(SID, TOKEN, LOCK_MS)[0] == TurnEnded(released=True, pending_fire="f9")
    finally:
        gate.set_estop(False)


# -- a renewal that Redis refuses ---------------------------------------------------------------


def test_a_renewal_a_demoted_primary_refuses_is_raised_not_taken_for_a_lost_lock(
    private_redis: PrivateRedis,
) -> None:
    """After a failover the old primary is a read-only replica: it answers the renewal with an
    error. That confirms nothing and proves nothing lost: the error is raised (the lock keeper
    turns it into an aborted turn that sends nothing)."""
    private_redis.start()
    client = connect(private_redis.url)
    try:
        keys = Keys("demoted")
        gate = TurnGate(client, keys)
        gate.load_scripts()  # as a worker does at start-up
        assert isinstance(gate.try_begin_user(SID, TOKEN, LOCK_MS), Began)
        # The new primary is elsewhere (nobody answers there): this server only serves reads.
        client.replicaof("127.0.0.1", _free_port())

        def stamp(pipe: redis.client.Pipeline) -> None:
            pipe.hset(keys.liveness(), SID, "delivering")

        with pytest.raises(redis.ReadOnlyError):
            gate.renew_after(SID, TOKEN, LOCK_MS, stamp)
        assert gate.lock_holder(SID) == TOKEN  # reads still answer
    finally:
        client.close()
