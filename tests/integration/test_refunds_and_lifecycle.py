"""Rules 9–11: the begin's re-check and refunds, compression/reset/suspend, restore — on real
components."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.harness import Gateway, gateway_settings, wait_until
from support.restoring import make_restorer
from support.scenarios import assert_invariants, busy_session_with_pending_fire

from hbgw.beat.core import BeatCore
from hbgw.core.clock import to_ms, utcnow
from hbgw.core.embedded import EmbeddedRedis
from hbgw.sessions.db import make_engine
from hbgw.sessions.states import MessageState, RefundReason, RunState, fire_id
from hbgw.sessions.store import Store
from hbgw.sessions.views import RunView
from hbgw.state.ownership import rendezvous_owner
from hbgw.state.turn_gate import Began

# Races are staged with the runner's seams: ``before_begin`` runs before the fire's lock is
# taken, so the re-check reads the change (Redis with the lock, SQL in the one transaction that
# claims, reserves and starts); ``after_start`` once that transaction started the run. Tests'
# hooks may return what the store call returned; the runner's hooks return nothing.
Hook = Callable[[str, str], object]


def run_with_hook(gw: Gateway, hook_for: Callable[[Gateway], Hook]) -> tuple[str, RunView]:
    """A fire whose hook runs before its begin, and the run it left."""
    with gw.worker("w1") as runner:
        hook = hook_for(gw)

        def before_begin(session_id: str, fid: str) -> None:
            hook(session_id, fid)

        runner.before_begin.append(before_begin)
        sid = gw.session()
        gw.due_now(sid)
        gw.tick()
        [run] = gw.final_runs(sid)
    return sid, run


def refused_with_hook(gw: Gateway, hook: Hook) -> str:
    """A fire whose hook runs before its begin and whose begin then refuses it: the index
    settled (the heartbeat has no due time any more) and the session idle again."""
    called: list[str] = []
    with gw.worker("w1") as runner:

        def before_begin(session_id: str, fid: str) -> None:
            hook(session_id, fid)
            called.append(fid)

        runner.before_begin.append(before_begin)
        sid = gw.session()
        gw.due_now(sid)
        gw.tick()
        wait_until(
            lambda: called and gw.rt.index.due_ms(sid) is None and gw.rt.gate.is_idle(sid),
            what="the refused fire to settle the index",
        )
    return sid


def owner_changes(gw: Gateway) -> Hook:
    def hook(sid: str, fid: str) -> None:
        usurper = next(
            f"w{i}" for i in range(2, 500) if rendezvous_owner(sid, ["w1", f"w{i}"]) != "w1"
        )
        gw.rt.registry.refresh(usurper, gw.rt.now_ms())

    return hook


def estop_on(gw: Gateway) -> Hook:
    return lambda sid, fid: gw.rt.gate.set_estop(True, sid)


@pytest.mark.parametrize(
    ("hook_for", "reason"),
    [(owner_changes, RefundReason.OWNER_CHANGED), (estop_on, RefundReason.EMERGENCY_STOP)],
)
def test_refund_before_agent_start_with_unchanged_generation(
    gateway: Gateway, hook_for: Callable[[Gateway], Hook], reason: RefundReason
) -> None:
    """What Redis read with the lock refuses the fire in the transaction that reserves it: the
    run is refunded there, nothing counted, the anchor unchanged."""
    sid, run = run_with_hook(gateway, hook_for)
    assert (run.state, run.detail, run.started_at) == (RunState.REFUNDED, reason, None)
    status = gateway.store.heartbeats.heartbeat_status(sid, utcnow())
    assert status.to_json()["fire_count"] == 0
    assert status.due_now  # the previous anchor is still there: still due
    # Retried after the back-off, not at once.
    due = gateway.rt.index.due_ms(sid)
    assert due is not None and due > to_ms(run.reserved_at)
    assert gateway.deliveries(sid) == []
    assert_invariants(gateway)


def test_session_reset_before_the_begin_refuses_the_fire(gateway: Gateway) -> None:
    """A reset between admission and the begin clears the heartbeat: the begin reserves
    nothing (no run, nothing to give back) and nothing is sent."""
    sid = refused_with_hook(gateway, lambda s, f: gateway.store.sessions.reset(s, utcnow()))
    assert gateway.runs(sid) == []
    assert gateway.store.heartbeats.heartbeat_status(sid, utcnow()).status == "none"
    assert gateway.deliveries(sid) == []


def test_pause_before_the_begin_refuses_the_fire(gateway: Gateway) -> None:
    sid = refused_with_hook(
        gateway, lambda s, f: gateway.store.heartbeats.pause_heartbeat(s, utcnow())
    )
    assert gateway.runs(sid) == []
    status = gateway.store.heartbeats.heartbeat_status(sid, utcnow()).to_json()
    assert status["status"] == "paused" and status["fire_count"] == 0
    assert gateway.deliveries(sid) == []
    assert_invariants(gateway)


@pytest.mark.parametrize("change", ["pause", "reset"])
def test_a_change_after_the_start_takes_effect_at_the_next_fire(
    gateway: Gateway, change: str
) -> None:
    """Once the one transaction started the run, the agent runs and the fire counts: a pause or
    reset made then stops the fires after it, not this one."""
    gw = gateway
    with gw.worker("w1") as runner:

        def after_start(session_id: str, run: RunView) -> None:
            if change == "pause":
                gw.store.heartbeats.pause_heartbeat(session_id, utcnow())
            else:
                gw.store.sessions.reset(session_id, utcnow())

        runner.after_start.append(after_start)
        sid = gw.session()
        gw.due_now(sid)
        gw.tick()
        [run] = gw.final_runs(sid)
        for _ in range(3):
            gw.tick()
    assert run.state == RunState.COMPLETED and run.started_at is not None
    assert [r["kind"] for r in gw.deliveries(sid, "send")] == ["heartbeat"]
    status = gw.store.heartbeats.heartbeat_status(sid, utcnow()).to_json()
    if change == "pause":
        assert status["status"] == "paused" and status["fire_count"] == 1
    else:
        assert status["status"] == "none"
    assert [r.id for r in gw.runs(sid)] == [run.id]  # no fire after the change
    assert_invariants(gw)


def test_fire_admitted_before_compression_executes_in_child(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = busy_session_with_pending_fire(gw)
        child = gw.store.sessions.compress(sid, utcnow())
        [run] = gw.final_runs(child.id)
    assert run.session_id == child.id and run.state == RunState.COMPLETED
    [sent] = gw.deliveries(child.id, "send")
    assert sent["kind"] == "heartbeat"
    assert gw.store.heartbeats.heartbeat_status(child.id, utcnow()).to_json()["fire_count"] == 1
    assert_invariants(gw)


@pytest.mark.parametrize("departure", ["reset", "suspend"])
def test_fire_admitted_before_reset_or_suspend_never_executes(
    gateway: Gateway, departure: str
) -> None:
    gw = gateway
    with gw.worker("w1"):
        sid = busy_session_with_pending_fire(gw)
        getattr(gw.store.sessions, departure)(sid, utcnow())
        wait_until(lambda: gw.rt.gate.is_idle(sid), what="the session to go idle")
        for _ in range(3):
            gw.tick()
    assert gw.runs(sid) == []
    assert [r["kind"] for r in gw.deliveries(sid, "send")] == ["reply"]


def test_restore_after_flushall_rebuilds_the_index(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path / "own-redis") as server:
        url = server.start()
        gw = Gateway(gateway_settings(tmp_path, url, "hbgw"), url)
        try:
            active, paused, cleared, suspended = (gw.session() for _ in range(4))
            for sid in (active, paused, cleared, suspended):
                gw.heartbeat(sid, seconds=600)
            with gw.worker("w1"):
                gw.due_now(active, seconds=600)
                gw.tick()
                gw.final_runs(active)
            gw.store.heartbeats.pause_heartbeat(paused, utcnow())
            gw.store.heartbeats.clear_heartbeat(cleared, utcnow())
            gw.store.sessions.suspend(suspended, utcnow())
            fence = gw.store.ledger.max_fence(active)
            assert fence >= 1

            gw.rt.client.flushall()
            BeatCore(gw.rt, gw.dispatcher).restore_now(gw.rt.now_ms())

            true_due = gw.store.heartbeats.heartbeat_status(active, utcnow()).next_due
            assert true_due is not None
            assert gw.rt.index.due_ms(active) == to_ms(true_due)
            for skipped in (paused, cleared, suspended):
                assert gw.rt.index.due_ms(skipped) is None
            assert gw.rt.index.size() == 1
            assert gw.rt.gate.fence(active) >= fence  # the fence survives the loss of Redis
            assert gw.rt.gate.is_idle(active)
            assert_invariants(gw)
        finally:
            gw.close()


def test_restore_read_failure_never_prunes(gateway: Gateway, tmp_path: Path) -> None:
    gw = gateway
    sid = gw.session()
    gw.heartbeat(sid, seconds=600)
    before = gw.rt.index.due_ms(sid)
    unreadable = Store(make_engine(f"sqlite:///{tmp_path / 'unmigrated.sqlite3'}"))
    report = make_restorer(gw.rt, store=unreadable).step(gw.rt.now_ms(), force=True)
    unreadable.close()
    assert report.ran and not report.ok
    assert gw.rt.index.due_ms(sid) == before
    assert gw.rt.client.exists(gw.rt.keys.restore_lease()) == 0  # given up for the next try


def test_message_queued_before_compression_is_still_answered(gateway: Gateway) -> None:
    gw = gateway
    sid = gw.session()
    message = gw.store.messages.add_message(
        sid,
        role="user",
        kind="user",
        text="before compression",
        now=utcnow(),
        state=MessageState.QUEUED,
    )
    gw.rt.gate.enqueue_user(sid, str(message.id))  # no worker is up yet
    gw.store.sessions.compress(sid, utcnow())
    with gw.worker("w1"):
        gw.tick()  # the sweeper finds the parent's inbox
        reply = wait_until(lambda: gw.store.messages.reply_for(message.id), what="the reply")
    assert reply.session_id == sid
    assert gw.rt.gate.backlog(sid) == 0


def test_a_worker_dead_before_its_begin_leaves_nothing_to_give_back(gateway: Gateway) -> None:
    """A worker took the lock and died before its one transaction: the ledger has no run of it
    (no reservation waits for a refund), and the fire runs once the lock's lease is over."""
    gw = gateway
    sid = gw.session()
    gw.due_now(sid, missed=1)
    due = gw.rt.index.due_ms(sid)
    assert due is not None
    begun = gw.rt.gate.try_begin_fire(sid, fire_id(sid, due), "dead-worker", 100)
    assert isinstance(begun, Began)
    wait_until(lambda: gw.rt.gate.lock_holder(sid) is None, what="the dead lock's lease")
    assert gw.runs(sid) == []
    with gw.worker("w1"):
        assert gw.beat.recover_orphans(utcnow()) == 0
        gw.tick()
        [run] = gw.final_runs(sid)
    assert run.state == RunState.COMPLETED
    assert gw.store.heartbeats.heartbeat_status(sid, utcnow()).to_json()["fire_count"] == 1
    assert_invariants(gw)
