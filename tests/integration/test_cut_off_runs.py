"""Issue 15, hole 3: a run cut off in a session that never gets another grant is settled.

A worker took the lock, reserved and started a fire (or began delivering it), then vanished;
no message or fire comes to the session again, so no grant settles the run. Beat's restore pass
ends it ``failed`` ("cut off …") once it has been in its turn longer than HBGW_DEAD_AFTER with
the session lock free — and leaves alone a run whose lock is held or that is younger.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.fires import lock_free, vanished_turn
from support.harness import Gateway
from support.scenarios import assert_invariants

from hbgw.core.clock import to_ms, utcnow
from hbgw.sessions.states import LostLockDetail, RunState


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
    run = vanished_turn(gw, long_ago, delivering=delivering)
    lock_free(gw, run.session_id)
    gw.beat.restore_now(to_ms(utcnow()))  # the restore pass settles it as it begins
    [settled] = gw.store.ledger.runs(run.session_id)
    assert (settled.state, settled.detail) == (RunState.FAILED, detail.value)
    assert gw.beat.settle_cut_off(utcnow()) == 0  # settled once
    assert (
        gw.store.heartbeats.heartbeat_status(run.session_id, utcnow()).to_json()["fire_count"] == 1
    )
    assert_invariants(gw)


def test_a_young_run_or_a_held_lock_is_left_alone(gateway: Gateway) -> None:
    gw = gateway
    young = vanished_turn(gw, utcnow() - timedelta(seconds=1))
    lock_free(gw, young.session_id)
    long_ago = utcnow() - timedelta(seconds=gw.settings.dead_after + 60)
    # The turn is alive after all: it holds its lock (renewed as a running turn does). Held
    # from its begin: a 100 ms lease extended afterwards could lapse first on a loaded host.
    held = vanished_turn(gw, long_ago, lease_ms=60_000)
    assert gw.beat.settle_cut_off(utcnow()) == 0
    assert [r.state for r in gw.store.ledger.runs(young.session_id)] == [RunState.STARTED]
    assert [r.state for r in gw.store.ledger.runs(held.session_id)] == [RunState.STARTED]
