"""A fire given back (refunded) does not block the same due time from firing again.

A refund restores the previous anchor, so the heartbeat's next due time is again the refunded
fire's due time, and so is its fire id. Redis losing the due index (a restart without
persistence) makes the restore pass write exactly that due time back; the claim then met the
refunded ledger row, was taken for a duplicate delivery, and settled to the same due time,
over and over: the session never fired again (seen once in the chaos run).
"""

from __future__ import annotations

from support.harness import Gateway, wait_until
from support.restoring import make_restorer
from support.scenarios import assert_invariants

from hbgw.core.clock import to_ms
from hbgw.sessions.states import RefundReason, RunState, fire_id
from hbgw.sessions.views import RunView


def test_refunded_due_time_fires_again_after_the_index_is_rebuilt(gateway: Gateway) -> None:
    gw = gateway
    with gw.worker("w1") as runner:

        def estop_once(sid: str, fid: str) -> None:
            # Refuse the first fire only: the emergency stop is on when its lock is taken.
            runner.before_begin.clear()
            gw.rt.gate.set_estop(True, sid)

        runner.before_begin.append(estop_once)
        sid = gw.session()
        gw.due_now(sid, seconds=60)
        due = gw.rt.index.due_ms(sid)
        assert due is not None
        gw.tick()
        [refunded] = gw.final_runs(sid)
        assert (refunded.state, refunded.detail) == (RunState.REFUNDED, RefundReason.EMERGENCY_STOP)
        assert refunded.fire_id == fire_id(sid, due)
        gw.rt.gate.set_estop(False, sid)

        # Redis lost the index: the restore pass puts back the true next due time, which the
        # refund made the refunded fire's due time again.
        gw.rt.index.remove(sid)
        make_restorer(gw.rt).run_sweep(gw.rt.now_ms())
        assert gw.rt.index.due_ms(sid) == due

        def fired() -> list[RunView]:
            gw.tick()
            return [r for r in gw.runs(sid) if r.state == RunState.COMPLETED]

        [done] = wait_until(fired, what="the heartbeat to fire after its refund")
        assert done.fire_id != refunded.fire_id
        assert to_ms(done.due_at) > due
    assert_invariants(gw)
