"""Fencing and backlog of the worker (issue 7, defects 3 and 4), and the empty heartbeat reply.

On real Redis, SQL and Celery workers. Races are staged with the runner's ``after_start`` seam
and a one-thread executor; a lease running out is observed on a real Redis key, never slept.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from support.harness import Gateway, gateway_settings, wait_until
from support.scenarios import assert_invariants, send, started_run

from hbgw.core.clock import utcnow
from hbgw.gateway.inbound import Queued
from hbgw.sessions.states import LostLockDetail, RunState
from hbgw.sessions.views import RunView
from hbgw.workers.runner import TurnRunner


def accept_due_fire(gw: Gateway, runner: TurnRunner, sid: str) -> str:
    """What the fire task does with one claimed fire (beat's claim itself is not needed here)."""
    due_ms = gw.rt.index.due_ms(sid)
    assert due_ms is not None
    return runner.accept_fire(sid, due_ms)


def wait_out_one_lease(gw: Gateway) -> None:
    """A lock taken now, left to expire: observed on Redis, so at least one lease has passed."""
    canary = "lease-canary"
    gw.rt.gate.try_begin_user(canary, "canary", int(gw.settings.lock_lease * 1000))
    wait_until(lambda: gw.rt.gate.lock_holder(canary) is None, what="a whole lease to pass")


def test_empty_heartbeat_reply_is_silent(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    """Rule 7. Defect: an agent that answered nothing had "" delivered, recorded completed."""
    settings = gateway_settings(tmp_path, redis_url, redis_ns, agent_command="true")
    gw = Gateway(settings, redis_url)
    try:
        with gw.worker("w1"):
            sid = gw.session()
            gw.due_now(sid)
            gw.tick()
            [run] = gw.final_runs(sid)
        assert run.state == RunState.SILENT
        assert gw.deliveries(sid, "send") == []
    finally:
        gw.close()


def test_backlog_longer_than_the_lease_runs_every_fire(
    tmp_path: Path, redis_url: str, redis_ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 4: the lock was taken when a fire was accepted, but renewed only once a turn
    thread took it up; fires waiting longer than a lease lost their lock before they began."""
    caplog.set_level(logging.INFO, logger="hbgw")
    gw = Gateway(gateway_settings(tmp_path, redis_url, redis_ns, lock_lease=1), redis_url)
    release = threading.Event()
    try:
        with gw.worker("w1", threads=1) as runner:
            blocker = gw.session(chat="A")
            backlog = [gw.session(chat=f"B{i}") for i in range(3)]

            def hold_the_only_thread(sid: str, run: RunView) -> None:
                if sid == blocker:
                    release.wait(timeout=30)

            runner.after_start.append(hold_the_only_thread)
            try:
                gw.due_now(blocker)
                accept_due_fire(gw, runner, blocker)
                wait_until(lambda: gw.runs(blocker), what="the blocker to hold the thread")
                for sid in backlog:
                    gw.due_now(sid)
                    accept_due_fire(gw, runner, sid)
                wait_out_one_lease(gw)
            finally:
                release.set()
            finished = {sid: gw.final_runs(sid) for sid in [blocker, *backlog]}
        assert {sid: [r.state for r in runs] for sid, runs in finished.items()} == {
            sid: [RunState.COMPLETED] for sid in [blocker, *backlog]
        }
        assert len(gw.deliveries(call="send")) == 4
        # The harness runs its test agent as the test's own user, which says so (a warning).
        trouble = [
            r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.WARNING and getattr(r, "action", "") != "agent.same_user"
        ]
        assert trouble == []
    finally:
        gw.close()


def take_over(gw: Gateway, sid: str, fence: int, how: str) -> None:
    """The lock moves on while a turn is held: it ran out (nobody took it yet), or a newer
    grant took it (as a worker that outlived a paused one would), or SQL alone knows the newer
    grant (the old turn's keeper has not noticed anything)."""
    gate = gw.rt.gate
    if how in ("expired", "stolen"):
        gw.rt.client.delete(gw.rt.keys.lock(sid))
    if how == "stolen":
        taken = gate.try_begin_user(sid, "newer-owner", int(gw.settings.lock_lease * 1000))
        fence = getattr(taken, "fence", fence + 1)
    if how in ("stolen", "sql-only"):
        gw.store.ledger.claim_fence(sid, fence if how == "stolen" else fence + 1, utcnow())


@pytest.mark.parametrize("how", ["expired", "stolen", "sql-only"])
def test_heartbeat_turn_that_lost_its_lock_sends_nothing_and_fails(
    gateway: Gateway, tmp_path: Path, how: str
) -> None:
    """Defect 3: a turn that lost its lock mid-turn must deliver nothing, and its run must not
    stay ``started`` for ever: it ends ``failed``, "lock lost before delivery"."""
    gw, release = gateway, tmp_path / "release"
    with gw.worker("w1"):
        sid = gw.session()
        gw.due_now(sid, prompt=f"HOLD {release} then report")
        gw.tick()
        run = started_run(gw, sid, "the turn to be held in the agent")
        take_over(gw, sid, run.fence, how)
        release.touch()
        [after] = gw.final_runs(sid)
        if how == "stolen":
            gw.rt.gate.release(sid, "newer-owner")
    assert (after.state, after.detail) == (RunState.FAILED, LostLockDetail.BEFORE_DELIVERY)
    assert gw.deliveries(sid, "send") == []
    assert [m.kind for m in gw.store.messages.list_messages(sid)] == ["heartbeat"]
    assert_invariants(gw)


def test_user_turn_behind_a_newer_fence_sends_nothing_and_the_next_grant_answers(
    gateway: Gateway, tmp_path: Path
) -> None:
    """Defect 3 for user turns: the stale turn's reply never leaves; the message is answered
    once, by the grant that follows."""
    gw, release = gateway, tmp_path / "release"
    with gw.worker("w1"):
        sid = gw.session()
        queued = send(gw, sid, f"HOLD {release} hello")
        assert isinstance(queued, Queued)
        wait_until(lambda: gw.rt.gate.lock_holder(sid), what="the user turn to hold the lock")
        held_fence = gw.rt.gate.fence(sid)
        take_over(gw, sid, held_fence, "sql-only")
        release.touch()
        reply = wait_until(lambda: gw.store.messages.reply_for(queued.message_id), what="the reply")
        wait_until(lambda: gw.rt.gate.lock_holder(sid) is None, what="the session to go idle")
    [sent] = [r for r in gw.deliveries(sid, "send") if r["kind"] == "reply"]
    assert sent["text"] == reply.text == "user reply to: HOLD " + str(release) + " hello"
    assert gw.rt.gate.fence(sid) > held_fence + 1  # answered by a grant after the newer one
