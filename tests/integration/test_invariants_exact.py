"""The invariant check is exact at any moment (issue 7, defects 3 and 8): no false alarm while
a real gateway is busy, and a violation constructed in SQL is still caught.

The ledger side runs on SQLite and PostgreSQL; the busy gateway on real Redis, SQLite and
Celery workers, with the check running in a thread of its own beside the traffic.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from support.fires import begin, finish, start
from support.harness import Gateway, wait_until
from support.scenarios import check_gateway, send
from support.seed import T0, make_session_with_heartbeat

from hbgw.core.errors import StaleFence
from hbgw.invariants import InvariantReport, audit
from hbgw.sessions.states import LostLockDetail, RefundReason, RunState
from hbgw.sessions.store import Store
from hbgw.sessions.views import NotStarted

MINUTE = timedelta(minutes=1)


def sql(store: Store, statement: str, **params: Any) -> None:
    with store.engine.begin() as conn:
        conn.execute(text(statement), params)


def report(store: Store, now: datetime) -> InvariantReport:
    return audit(store.ledger.audit_snapshot(), now)


def test_a_run_in_its_turn_and_a_refunded_one_are_counted(store: Store) -> None:
    """Defect 8: I3 compared the count (+1 at reservation) with runs that reached the agent. A
    run counts from the transaction that reserves and starts it; one that transaction gave
    back does not."""
    sid = make_session_with_heartbeat(store, seconds=600)
    now = T0 + timedelta(minutes=11)
    start(store, sid, 1, now)
    assert report(store, now).ok, report(store, now).to_json()
    later = now + timedelta(minutes=11)
    refused = begin(store, sid, 2, later, refusal=RefundReason.OWNER_CHANGED).outcome
    assert isinstance(refused, NotStarted) and refused.run.state == "refunded"
    assert report(store, later).ok, report(store, later).to_json()
    sql(store, "UPDATE heartbeats SET fire_count = fire_count + 1")
    assert report(store, later).violations["I3"] == [f"heartbeat of {sid}: count 2, runs 1"]


def test_the_next_grant_settles_a_cut_off_turn_and_the_stale_turn_cannot_deliver(
    store: Store,
) -> None:
    sid = make_session_with_heartbeat(store, seconds=600)
    t1 = T0 + timedelta(minutes=11)
    run = start(store, sid, 1, t1)
    store.ledger.claim_fence(sid, 2, t1 + MINUTE)  # the lock moved on while the turn was cut off
    [settled] = store.ledger.runs(sid)
    assert (settled.state, settled.detail) == (RunState.FAILED, LostLockDetail.BEFORE_DELIVERY)
    assert settled.finished_at == t1 + MINUTE
    with pytest.raises(StaleFence):
        store.ledger.mark_delivering(run.key, 1, t1 + 2 * MINUTE, channel="file", kind="heartbeat")
    with pytest.raises(StaleFence):
        store.ledger.settle_lost(run.key, 1, t1 + 2 * MINUTE)
    assert report(store, t1 + 2 * MINUTE).ok


def test_a_delivering_turn_cut_off_is_settled_as_such(store: Store) -> None:
    sid = make_session_with_heartbeat(store, seconds=600)
    t1 = T0 + timedelta(minutes=11)
    run = start(store, sid, 1, t1)
    assert (
        store.ledger.mark_delivering(run.key, 1, t1, channel="file", kind="heartbeat").state
        == RunState.DELIVERING
    )
    store.ledger.claim_fence(sid, 2, t1 + MINUTE)
    [settled] = store.ledger.runs(sid)
    assert (settled.state, settled.detail) == (RunState.FAILED, LostLockDetail.DURING_DELIVERY)


@pytest.mark.parametrize("stuck_in", [RunState.STARTED, RunState.DELIVERING])
def test_a_run_stuck_in_its_turn_beside_a_later_turn_is_an_overlap(
    store: Store, stuck_in: RunState
) -> None:
    """Defect 3: a run left ``started`` for ever was skipped by I1, so the stale turn's overlap
    with the next one was invisible. Constructed in SQL: the settlement undone."""
    sid = make_session_with_heartbeat(store, seconds=600)
    t1 = T0 + timedelta(minutes=11)
    first = start(store, sid, 1, t1)
    t2 = t1 + timedelta(minutes=11)
    second = start(store, sid, 2, t2)
    finish(store, second.key, RunState.COMPLETED, 2, t2 + MINUTE)
    sql(
        store,
        "UPDATE heartbeat_runs SET state = :state, finished_at = NULL, detail = NULL "
        "WHERE id = :id",
        state=stuck_in.value,
        id=first.id,
    )
    found = report(store, t2 + 2 * MINUTE)
    assert found.overlapping_turns == 1
    assert found.violations["I1"] == [
        f"{sid}: {first.fire_id} is still {stuck_in} under fence 1, "
        "though fence 2 was granted since",
        f"{sid}: {first.fire_id} overlaps {second.fire_id}",
    ]


def test_overlapping_finished_turns_are_caught(store: Store) -> None:
    sid = make_session_with_heartbeat(store, seconds=600)
    t1 = T0 + timedelta(minutes=11)
    first = start(store, sid, 1, t1)
    finish(store, first.key, RunState.COMPLETED, 1, t1 + MINUTE)
    t2 = t1 + timedelta(minutes=11)
    start(store, sid, 2, t2)
    # The first turn's end, as a stale turn would have written it: after the second began.
    sql(
        store,
        "UPDATE heartbeat_runs SET finished_at = :end WHERE id = :id",
        end=t2 + MINUTE,
        id=first.id,
    )
    assert report(store, t2 + 2 * MINUTE).overlapping_turns == 1


def test_no_false_alarm_while_a_gateway_is_busy_and_a_real_violation_is_caught(
    gateway: Gateway,
) -> None:
    """Defect 8: checked over and over while heartbeats fire every second and users write."""
    gw = gateway
    alarms: list[dict[str, Any]] = []
    checks = [0]
    stop = threading.Event()

    def keep_checking() -> None:
        # Paced: on SQLite every check takes the write lock, and the traffic needs it too.
        while not stop.wait(0.05):
            found = check_gateway(gw)
            checks[0] += 1
            if not found.ok:
                alarms.append(found.to_json())

    with gw.worker("w1"):
        sessions = [gw.session(chat=f"C{i}") for i in range(6)]
        for sid in sessions:
            gw.due_now(sid, seconds=1)
        checker = threading.Thread(target=keep_checking, name="invariant-checker")
        checker.start()
        sent = [0]

        def busy_enough() -> bool:
            gw.tick()
            sent[0] += 1
            sid = sessions[sent[0] % len(sessions)]
            if sent[0] % 5 == 0:
                send(gw, sid, f"hello {sent[0]}")
            if sent[0] % 37 == 0:
                gw.heartbeat(sid, seconds=1)  # replaced mid-traffic: count 0, anchored now
            done = [r for r in gw.runs() if r.state == RunState.COMPLETED]
            return len(done) >= 12 and checks[0] >= 30

        try:
            wait_until(busy_enough, timeout=90, what="12 fires and 30 checks under traffic")
        finally:
            stop.set()
            checker.join(timeout=30)
    assert alarms == []
    [victim, *_] = sessions
    sql(
        gw.store,
        "UPDATE heartbeats SET fire_count = fire_count + 5 WHERE session_id = :s",
        s=victim,
    )
    assert check_gateway(gw).violations["I3"], "a real miscount must still be caught"
