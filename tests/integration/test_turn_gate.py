"""The turn gate against a real server: try_begin, next_step, renew/release, seed, inbox, estop;
and its edges: a turn that lost its lock still leaves what it owes, a Redis that lost its
scripts (restarted) still grants, a drain granted under the global emergency stop gives its lock
back, and a renewal a demoted primary refuses confirms nothing."""

from __future__ import annotations

import logging

import pytest
import redis
from support.harness import wait_until
from support.private_redis import PrivateRedis, _free_port

from hbgw.state.connection import connect
from hbgw.state.keys import Keys
from hbgw.state.scripts import load_script
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


# -- try_begin ----------------------------------------------------------------------------------


def test_fire_on_fresh_session_counts_as_idle(gate: TurnGate) -> None:
    # Nothing in Redis at all (Redis restarted, or a worker died mid-turn and its lease ran
    # out): a free lock and an empty inbox are what idle means.
    assert gate.is_idle(SID)
    assert gate.try_begin_fire(SID, "f1", TOKEN, LOCK_MS) == Began(fence=1)
    assert gate.lock_holder(SID) == TOKEN
    assert gate.pending(SID) is None


def test_an_idle_scheduled_session_keeps_only_its_fence(
    gate: TurnGate, redis_client: redis.Redis, keys: Keys
) -> None:
    # What Redis holds per session besides its due entry: bounds memory at a million sessions.
    gate.try_begin_fire(SID, "f1", TOKEN, LOCK_MS)
    gate.next_step(SID, TOKEN, LOCK_MS)[0]
    gate.seed(SID, 1)
    assert gate.is_idle(SID)
    assert sorted(redis_client.keys(f"{keys.namespace}:*")) == [keys.fence(SID)]


def test_fire_takes_lock_with_lease_and_clears_idle(
    gate: TurnGate, redis_client: redis.Redis, keys: Keys
) -> None:
    gate.seed(SID, 0)
    assert gate.is_idle(SID)
    gate.try_begin_fire(SID, "f1", TOKEN, LOCK_MS)
    assert not gate.is_idle(SID)
    assert 0 < redis_client.pttl(keys.lock(SID)) <= LOCK_MS


def test_fire_on_busy_session_becomes_pending_and_newer_replaces_older(
    gate: TurnGate,
) -> None:
    gate.try_begin_user(SID, TOKEN, LOCK_MS)
    assert gate.try_begin_fire(SID, "f1", OTHER, LOCK_MS) == Busy("busy")
    assert gate.pending(SID) == "f1"
    assert gate.try_begin_fire(SID, "f2", OTHER, LOCK_MS) == Busy("busy")
    assert gate.pending(SID) == "f2"
    assert gate.lock_holder(SID) == TOKEN
    assert gate.fence(SID) == 1


def test_fire_waits_for_queued_user_messages(gate: TurnGate) -> None:
    gate.enqueue_user(SID, "m1")
    assert gate.try_begin_fire(SID, "f1", TOKEN, LOCK_MS) == Busy("inbox")
    assert gate.pending(SID) == "f1"
    assert gate.lock_holder(SID) is None
    assert gate.fence(SID) == 0


def test_fire_coalesces_pending_and_fences_increase(gate: TurnGate) -> None:
    gate.try_begin_user(SID, TOKEN, LOCK_MS)
    gate.try_begin_fire(SID, "f-old", OTHER, LOCK_MS)
    assert gate.next_step(SID, TOKEN, LOCK_MS)[0] == TurnEnded(released=True, pending_fire="f-old")
    gate.try_begin_fire(SID, "f-late", OTHER, LOCK_MS)  # idle again, takes the lock
    assert gate.pending(SID) is None
    assert gate.fence(SID) == 2
    gate.next_step(SID, OTHER, LOCK_MS)[0]
    assert gate.try_begin_fire(SID, "f3", TOKEN, LOCK_MS) == Began(fence=3)


def test_taking_the_lock_consumes_a_pending_fire(gate: TurnGate) -> None:
    gate.enqueue_user(SID, "m1")
    gate.try_begin_fire(SID, "f1", TOKEN, LOCK_MS)
    gate.ack_message(SID, gate.pop_message(SID) or "")
    assert gate.try_begin_fire(SID, "f2", TOKEN, LOCK_MS) == Began(fence=1)
    assert gate.pending(SID) is None


def test_user_mode(gate: TurnGate) -> None:
    gate.enqueue_user(SID, "m1")
    assert gate.try_begin_user(SID, OTHER, LOCK_MS) == Began(fence=1)  # inbox does not block
    assert gate.lock_holder(SID) == OTHER
    gate.try_begin_fire(SID, "f1", TOKEN, LOCK_MS)
    assert gate.try_begin_user(SID, TOKEN, LOCK_MS) == Busy("busy")
    assert gate.pending(SID) == "f1"  # user mode never touches the pending fire
    gate.ack_message(SID, gate.pop_message(SID) or "")
    gate.next_step(SID, OTHER, LOCK_MS)[0]
    assert gate.try_begin_user(SID, TOKEN, LOCK_MS) == Began(fence=2)


def test_unknown_mode_is_an_error(gate: TurnGate, redis_client: redis.Redis) -> None:
    script = load_script(redis_client, "hbgw.state", "lua/try_begin.lua")
    k = gate.keys
    session_keys = [
        k.lock(SID),
        k.fence(SID),
        k.inbox(SID),
        k.pending(SID),
        k.inflight(SID),
    ]
    with pytest.raises(redis.ResponseError, match='mode must be "fire", "job" or "user", got nap'):
        script(keys=session_keys, args=[TOKEN, LOCK_MS, "f", "nap"])
    # Refused before any write: no lock, no fence, no pending fire.
    assert redis_client.exists(*session_keys) == 0


def test_lease_must_be_positive(gate: TurnGate) -> None:
    with pytest.raises(ValueError, match="lease_ms"):
        gate.try_begin_user(SID, TOKEN, 0)


# -- next_step (the end of a turn) ------------------------------------------------------------


def test_end_turn_keeps_lock_while_inbox_is_not_empty(
    gate: TurnGate, redis_client: redis.Redis, keys: Keys
) -> None:
    gate.try_begin_user(SID, TOKEN, 50)
    gate.enqueue_user(SID, "m1")
    assert gate.next_step(SID, TOKEN, LOCK_MS)[0] == NextMessage("m1")
    assert gate.lock_holder(SID) == TOKEN
    assert redis_client.pttl(keys.lock(SID)) > 50  # renewed to the new lease
    assert not gate.is_idle(SID)


def test_end_turn_goes_idle_without_pending(gate: TurnGate) -> None:
    gate.try_begin_user(SID, TOKEN, LOCK_MS)
    assert gate.next_step(SID, TOKEN, LOCK_MS)[0] == TurnEnded(released=True, pending_fire=None)
    assert gate.is_idle(SID)
    assert gate.lock_holder(SID) is None


def test_end_turn_hands_back_the_pending_fire(gate: TurnGate) -> None:
    gate.try_begin_user(SID, TOKEN, LOCK_MS)
    gate.try_begin_fire(SID, "f1", OTHER, LOCK_MS)
    assert gate.next_step(SID, TOKEN, LOCK_MS)[0] == TurnEnded(released=True, pending_fire="f1")
    assert gate.pending(SID) is None
    assert gate.is_idle(SID)


def test_end_turn_with_a_lost_lock_changes_nothing(gate: TurnGate) -> None:
    gate.try_begin_user(SID, OTHER, LOCK_MS)
    gate.try_begin_fire(SID, "f1", TOKEN, LOCK_MS)
    assert gate.next_step(SID, TOKEN, LOCK_MS)[0] == LockLost()
    assert gate.lock_holder(SID) == OTHER
    assert gate.pending(SID) == "f1"
    assert gate.next_step("never-locked", TOKEN, LOCK_MS)[0] == LockLost()


# -- renew / release ----------------------------------------------------------------------------


def test_renew_compares_token(gate: TurnGate, redis_client: redis.Redis, keys: Keys) -> None:
    gate.try_begin_user(SID, TOKEN, 50)
    assert gate.renew(SID, OTHER, LOCK_MS) is False
    assert redis_client.pttl(keys.lock(SID)) <= 50
    assert gate.renew(SID, TOKEN, LOCK_MS) is True
    assert redis_client.pttl(keys.lock(SID)) > 50
    assert gate.renew("never-locked", TOKEN, LOCK_MS) is False


def test_renew_after_sends_the_stamp_and_the_renewal_together(
    gate: TurnGate, redis_client: redis.Redis, keys: Keys
) -> None:
    gate.try_begin_user(SID, TOKEN, 50)

    def stamp(pipe: redis.client.Pipeline) -> None:
        pipe.hset(keys.liveness(), SID, "delivering")

    assert gate.renew_after(SID, TOKEN, LOCK_MS, stamp) is True
    assert redis_client.pttl(keys.lock(SID)) > 50
    assert redis_client.hget(keys.liveness(), SID) == "delivering"
    assert gate.renew_after(SID, OTHER, LOCK_MS, stamp) is False
    # A Redis that lost its scripts (restarted) answers NOSCRIPT to the sha: a sha it never
    # saw stands for that here; ``renew`` loads the script and answers.
    gate._renew.sha = "0" * 40
    assert gate.renew_after(SID, TOKEN, LOCK_MS, stamp) is True


def test_release_compares_token(gate: TurnGate) -> None:
    gate.try_begin_user(SID, TOKEN, LOCK_MS)
    assert gate.release(SID, OTHER) is False
    assert gate.lock_holder(SID) == TOKEN
    assert gate.release(SID, TOKEN) is True
    assert gate.lock_holder(SID) is None
    assert gate.release(SID, TOKEN) is False
    # Released without idle flag: the next fire still starts.
    assert gate.try_begin_fire(SID, "f1", TOKEN, LOCK_MS) == Began(fence=2)


# -- seed ---------------------------------------------------------------------------------------


def test_seed_sets_a_missing_fence_and_idle(gate: TurnGate) -> None:
    assert gate.seed(SID, 41) == 41
    assert gate.fence(SID) == 41
    assert gate.is_idle(SID)
    assert gate.try_begin_fire(SID, "f1", TOKEN, LOCK_MS) == Began(fence=42)


def test_seed_raises_but_never_lowers_the_fence(gate: TurnGate) -> None:
    gate.seed(SID, 10)
    assert gate.seed(SID, 20) == 20
    assert gate.seed(SID, 5) == 20
    assert gate.fence(SID) == 20


def test_seed_leaves_idle_alone_while_busy_or_queued(gate: TurnGate) -> None:
    gate.try_begin_user(SID, TOKEN, LOCK_MS)
    gate.seed(SID, 0)
    assert not gate.is_idle(SID)
    gate.release(SID, TOKEN)
    gate.enqueue_user(SID, "m1")
    gate.seed(SID, 0)
    assert not gate.is_idle(SID)
    assert gate.fence(SID) == 1


# -- inbox and estop ----------------------------------------------------------------------------


def test_inbox_is_fifo_clears_idle_and_records_hint(
    gate: TurnGate, redis_client: redis.Redis, keys: Keys
) -> None:
    gate.seed(SID, 0)
    assert gate.enqueue_user(SID, "m1") == 1
    assert gate.enqueue_user(SID, "m2") == 2
    assert not gate.is_idle(SID)
    assert redis_client.sismember(keys.inbox_sessions(), SID)
    assert gate.inbox_length(SID) == 2
    assert gate.pop_message(SID) == "m1"
    assert gate.pop_message(SID) == "m2"
    assert gate.pop_message(SID) is None
    assert gate.backlog(SID) == 2  # taken, not yet answered
    gate.ack_message(SID, "m1")
    assert gate.backlog(SID) == 1


def test_messages_of_a_dead_turn_go_back_to_the_inbox_first(gate: TurnGate) -> None:
    gate.enqueue_user(SID, "m1")
    gate.enqueue_user(SID, "m2")
    assert gate.try_begin_user(SID, OTHER, LOCK_MS) == Began(fence=1)
    assert gate.pop_message(SID) == "m1"
    gate.release(SID, OTHER)  # as if its lease ran out
    # A fire sees the recovered message and waits; the next drain answers m1 before m2.
    assert gate.try_begin_fire(SID, "f1", TOKEN, LOCK_MS) == Busy("inbox")
    assert gate.try_begin_user(SID, TOKEN, LOCK_MS) == Began(fence=2)
    assert gate.pop_message(SID) == "m1"
    assert gate.pop_message(SID) == "m2"


def test_next_step_reads_the_estop_with_the_inbox(gate: TurnGate) -> None:
    gate.enqueue_user(SID, "m1")
    gate.enqueue_user(SID, "m2")
    gate.try_begin_user(SID, TOKEN, LOCK_MS)
    gate.set_estop(True, SID)
    # Stopped: nothing is taken, the lock is given back, the inbox keeps its order for the
    # drain after the stop.
    assert gate.next_step(SID, TOKEN, LOCK_MS)[0] == Stopped()
    assert gate.backlog(SID) == 2 and gate.lock_holder(SID) is None
    gate.set_estop(False, SID)
    began = gate.try_begin_drain(SID, TOKEN, LOCK_MS)
    assert isinstance(began, Began) and began.first == NextMessage("m1")
    assert gate.next_step(SID, TOKEN, LOCK_MS, ack="m1")[0] == NextMessage("m2")
    assert gate.backlog(SID) == 1  # m1 acknowledged; m2 taken, not yet answered
    # The global stop is read beside the script: a message taken goes back to the head.
    gate.enqueue_user(SID, "m3")
    gate.set_estop(True)
    assert gate.next_step(SID, TOKEN, LOCK_MS, ack="m2")[0] == Stopped()
    assert gate.pop_message(SID) == "m3" and gate.lock_holder(SID) is None
    gate.set_estop(False)


def test_a_drain_grant_keeps_the_lock_with_an_empty_inbox(gate: TurnGate) -> None:
    """Its delivery retries run first; only the step after them ends the turn."""
    began = gate.try_begin_drain(SID, TOKEN, LOCK_MS)
    assert isinstance(began, Began) and began.first == Kept()
    assert gate.lock_holder(SID) == TOKEN
    assert gate.try_begin_drain(SID, OTHER, LOCK_MS) == Busy("busy")
    assert gate.next_step(SID, TOKEN, LOCK_MS)[0] == TurnEnded(released=True, pending_fire=None)


def test_next_step_sends_what_the_turn_left_first(
    gate: TurnGate, redis_client: redis.Redis, keys: Keys
) -> None:
    gate.try_begin_user(SID, TOKEN, LOCK_MS)
    step, errors = gate.next_step(
        SID,
        TOKEN,
        LOCK_MS,
        first=lambda pipe: [pipe.set(keys.pending(SID), "f9"), pipe.lpush(keys.pending(SID), "x")],
    )
    # The queued SET ran before the step, which hands it back; a failing command is reported.
    assert step == TurnEnded(released=True, pending_fire="f9")
    assert len(errors) == 1 and isinstance(errors[0], redis.ResponseError)


def test_estop_global_and_per_session(gate: TurnGate) -> None:
    assert not gate.estop_active(SID)
    gate.set_estop(True, SID)
    assert gate.estop_active(SID)
    assert not gate.estop_active("other")
    gate.set_estop(True)
    assert gate.estop_active("other")
    gate.set_estop(False)
    assert not gate.estop_active("other")
    assert gate.estop_active(SID)
    gate.set_estop(False, SID)
    assert not gate.estop_active(SID)


def test_seed_many_matches_seed(gate: TurnGate) -> None:
    gate.try_begin_user("busy", TOKEN, LOCK_MS)  # fence 1, locked: not marked idle
    gate.seed_many({SID: 7, "busy": 3, "fresh": 0})
    assert (gate.fence(SID), gate.fence("busy"), gate.fence("fresh")) == (7, 3, 0)
    assert gate.is_idle(SID) and gate.is_idle("fresh") and not gate.is_idle("busy")


# -- the gate's edges ------------------------------------------------------------------------


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
