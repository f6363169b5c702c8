"""What a fire's grant read with its lock, weighed by the re-check (``heartbeat_turn.
grant_refusal``): a lock the keeper found lost, then the emergency stop, then the owner."""

from __future__ import annotations

import pytest
import redis

from hbgw.sessions.states import RefundReason
from hbgw.state.keys import Keys
from hbgw.state.turn_gate import TurnGate
from hbgw.workers.heartbeat_turn import grant_refusal
from hbgw.workers.locks import Grant, Lease, LockKeeper, Recheck

ME = "w1"


def lease(seen: Recheck | None, *, lost: bool = False) -> Lease:
    # A client that is never used: nothing here talks to Redis.
    gate = TurnGate(redis.Redis(host="127.0.0.1", port=1), Keys("unit"))
    keeper = LockKeeper(gate, "s-1", "token", 3000)
    if lost:
        keeper.lost.set()
    return Lease(Grant("s-1", "token", 7, seen=seen), keeper)


@pytest.mark.parametrize(
    ("seen", "lost", "refusal"),
    [
        (Recheck(estop=False, owner=ME), False, None),
        (Recheck(estop=False, owner="w2"), False, RefundReason.OWNER_CHANGED),
        (Recheck(estop=False, owner=None), False, RefundReason.OWNER_CHANGED),
        (Recheck(estop=True, owner="w2"), False, RefundReason.EMERGENCY_STOP),
        (Recheck(estop=True, owner="w2"), True, RefundReason.LOCK_LOST),
        (None, True, RefundReason.LOCK_LOST),
    ],
)
def test_the_lock_first_then_the_stop_then_the_owner(
    seen: Recheck | None, lost: bool, refusal: RefundReason | None
) -> None:
    assert grant_refusal(ME, lease(seen, lost=lost)) is refusal


def test_a_grant_that_read_nothing_with_its_lock_refuses_nothing() -> None:
    """A drain's grant reads no stop or owner with its lock: only SQL's own reasons apply."""
    assert grant_refusal(ME, lease(None)) is None
