"""The runner's lock, fence and error policy, on real Redis, Celery workers and SQL.

Races are staged with the runner's seams (``after_start``: the run started, before the agent)
and a one-thread executor, never by sleeping: a blocked heartbeat turn of one session holds the
only turn thread while the test changes the world before another session's turn begins.
"""

from __future__ import annotations

import logging
import threading

import pytest
from support.harness import Gateway, wait_until
from support.scenarios import assert_invariants, send

from hbgw.core.clock import utcnow
from hbgw.core.errors import InvalidState
from hbgw.gateway.inbound import Queued
from hbgw.sessions.states import SETTLED, RunState
from hbgw.sessions.views import RunView


def answered(gw: Gateway, message_id: int, *, tick: bool) -> object:
    """The stored reply to a message; ``tick`` lets beat's sweeper retry stuck inboxes."""
    if tick:
        gw.tick()
    return gw.store.messages.reply_for(message_id)


def finished_after_tick(gw: Gateway, sid: str) -> list[RunView]:
    gw.tick()
    return [r for r in gw.runs(sid) if r.state in SETTLED]


def test_refused_reservation_then_user_message_is_answered_once(gateway: Gateway) -> None:
    """Defect: a refused fire left the grant's fence unclaimed, so the user turn drained
    under that lock delivered, then its fenced write failed, and a retry delivered again."""
    gw = gateway
    release_blocker = threading.Event()
    with gw.worker("w1", threads=1) as runner:
        blocker, victim = gw.session(chat="A"), gw.session(chat="B")

        def hold_the_only_turn_thread(sid: str, run: RunView) -> None:
            if sid == blocker:
                release_blocker.wait(timeout=30)

        runner.after_start.append(hold_the_only_turn_thread)
        try:
            gw.due_now(blocker)
            gw.tick()
            wait_until(lambda: gw.runs(blocker), what="the blocker to start and block")
            gw.due_now(victim)
            due_ms = gw.rt.index.due_ms(victim)
            assert due_ms is not None
            # What the fire task does: accepted, it waits for the only turn thread.
            assert runner.accept_fire(victim, due_ms) == "accepted"
            # Its turn waits for the thread; by then the heartbeat is no longer due.
            gw.heartbeat(victim, seconds=600)
            queued = send(gw, victim, "hello")
            assert isinstance(queued, Queued)
        finally:
            release_blocker.set()
        wait_until(lambda: answered(gw, queued.message_id, tick=True), what="the reply")
        wait_until(
            lambda: gw.rt.gate.backlog(victim) == 0 and gw.rt.gate.lock_holder(victim) is None,
            what="the victim to go idle",
        )
        gw.tick()
    replies = [r for r in gw.deliveries(victim, "send") if r["kind"] == "reply"]
    assert [r["text"] for r in replies] == ["user reply to: hello"]
    assert gw.runs(victim) == []  # the refused fire wrote nothing
    assert_invariants(gw)


def test_typed_error_in_heartbeat_turn_frees_the_session_at_once(
    gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect: any HbgwError was taken for a lost lock: no release, no drain, so the queued
    message waited a whole lease and a sweep. Here the started turn raises a typed error
    (InvalidState) after a message was queued."""
    gw = gateway
    caplog.set_level(logging.WARNING, logger="hbgw.runner")
    queued: list[Queued] = []
    with gw.worker("w1") as runner:
        sid = gw.session()

        def queue_a_message_and_fail(s: str, run: RunView) -> None:
            message = send(gw, s, "hello")
            assert isinstance(message, Queued)
            queued.append(message)
            raise InvalidState(f"Run {run.fire_id} cannot go on.")

        runner.after_start.append(queue_a_message_and_fail)
        gw.due_now(sid)
        gw.tick()
        wait_until(lambda: queued, what="the hook to run")
        # No beat tick from here on: only the runner itself can answer the message.
        reply = wait_until(
            lambda: answered(gw, queued[0].message_id, tick=False), timeout=15, what="the reply"
        )
        wait_until(lambda: gw.rt.gate.lock_holder(sid) is None, what="the lock to be released")
    assert reply.text == "user reply to: hello"
    [run] = gw.runs(sid)
    # It reached the agent's door: it counts, and stays in its turn until a newer grant (or
    # beat's restore pass, after HBGW_DEAD_AFTER) ends it cut off.
    assert run.state == RunState.STARTED
    # Reported, not dropped: the failure names its session and fire.
    [failed] = [r for r in caplog.records if getattr(r, "action", "") == "heartbeat.failed"]
    assert (failed.session, failed.fire_id) == (sid, run.fire_id)  # type: ignore[attr-defined]


def test_user_drain_behind_sql_fence_resyncs_and_answers_once(gateway: Gateway) -> None:
    """Redis lost its fence counter (SQL is ahead): the first grant's claim is refused, the
    loop raises Redis' counter to SQL's and drains again under a newer lock."""
    gw = gateway
    sid = gw.session()
    gw.store.ledger.claim_fence(sid, 5, utcnow())
    with gw.worker("w1"):
        queued = send(gw, sid, "hello")
        assert isinstance(queued, Queued)
        wait_until(lambda: answered(gw, queued.message_id, tick=False), what="the reply")
        wait_until(lambda: gw.rt.gate.lock_holder(sid) is None, what="the lock to go")
    assert gw.rt.gate.fence(sid) > 5
    assert [r["text"] for r in gw.deliveries(sid, "send")] == ["user reply to: hello"]


def test_fire_behind_sql_fence_resyncs_and_fires(gateway: Gateway) -> None:
    gw = gateway
    sid = gw.session()
    gw.store.ledger.claim_fence(sid, 5, utcnow())
    with gw.worker("w1"):
        gw.due_now(sid)
        [run] = wait_until(lambda: finished_after_tick(gw, sid), what="the fire after a resync")
    assert run.state == "completed" and run.fence > 5
    assert [r["kind"] for r in gw.deliveries(sid, "send")] == ["heartbeat"]
    assert_invariants(gw)
