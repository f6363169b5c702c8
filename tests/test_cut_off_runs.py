"""Issue 15, hole 3: a run cut off in a session that never gets another grant is settled.

A worker took the lock, reserved and started a fire (or began delivering it), then vanished;
no message or fire comes to the session again, so no grant settles the run. Beat's restore pass
ends it ``failed`` ("cut off …") once it has been in its turn longer than HBGW_DEAD_AFTER with
the session lock free — and leaves alone a run whose lock is held or that is younger.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from support.fires import start
from support.harness import Gateway, wait_until
from support.scenarios import assert_invariants

from core.clock import to_ms, utcnow
from sessions.states import LostLockDetail, RunState, fire_id
from sessions.views import Reserved, RunView
from state.turn_gate import Began

LEASE_MS = 100  # the vanished worker's lock lease


def _vanished_turn(gw: Gateway, started_at: datetime, *, delivering: bool = False) -> RunView:
    """A run started by a worker that then disappeared, its lock left to expire."""
    sid = gw.session()
    gw.due_now(sid, missed=int((utcnow() - started_at).total_seconds()) // 60 + 1)
    due = gw.rt.index.due_ms(sid)
    assert due is not None
    begun = gw.rt.gate.try_begin_fire(sid, fire_id(sid, due), "vanished-worker", LEASE_MS)
    assert isinstance(begun, Began)
    claimed = gw.store.claim_fire(sid, begun.fence, fire_id(sid, due), due, started_at)
    assert isinstance(claimed.outcome, Reserved)
    run = start(gw.store, claimed.outcome.run, begun.fence, started_at)
    if delivering:
        run = gw.store.mark_delivering(
            run.id, begun.fence, started_at, channel="file", kind="heartbeat"
        )
    return run


def _lock_free(gw: Gateway, sid: str) -> None:
    wait_until(lambda: gw.rt.gate.lock_holder(sid) is None, what="the vanished lock's lease")


@pytest.mark.parametrize(
    ("delivering", "detail"),
    [
        (False, LostLockDetail.CUT_OFF_BEFORE_DELIVERY),
        (True, LostLockDetail.CUT_OFF_DURING_DELIVERY),
    ],
)
def test_a_cut_off_run_without_a_later_grant_is_settled_failed(
    gateway: Gateway, delivering: bool, detail: LostLockDetail
) -> None:
    gw = gateway
    long_ago = utcnow() - timedelta(seconds=gw.settings.dead_after + 60)
    run = _vanished_turn(gw, long_ago, delivering=delivering)
    _lock_free(gw, run.session_id)
    gw.beat.restore_now(to_ms(utcnow()))  # the restore pass settles it as it begins
    [settled] = gw.store.runs(run.session_id)
    assert (settled.state, settled.detail) == (RunState.FAILED, detail.value)
    assert gw.beat.settle_cut_off(utcnow()) == 0  # settled once
    assert gw.store.heartbeat_status(run.session_id, utcnow()).to_json()["fire_count"] == 1
    assert_invariants(gw)


def test_a_young_run_or_a_held_lock_is_left_alone(gateway: Gateway) -> None:
    gw = gateway
    young = _vanished_turn(gw, utcnow() - timedelta(seconds=1))
    _lock_free(gw, young.session_id)
    long_ago = utcnow() - timedelta(seconds=gw.settings.dead_after + 60)
    held = _vanished_turn(gw, long_ago)
    # The turn is alive after all: it holds its lock (renewed as a running turn does).
    gw.rt.client.pexpire(gw.rt.keys.lock(held.session_id), 60_000)
    assert gw.beat.settle_cut_off(utcnow()) == 0
    assert [r.state for r in gw.store.runs(young.session_id)] == [RunState.STARTED]
    assert [r.state for r in gw.store.runs(held.session_id)] == [RunState.STARTED]
