"""Two grants claiming one fire id at once: exactly one ledger row, counted at most once (and
only while it is reserved), whatever the timing."""

from __future__ import annotations

import multiprocessing
import threading
from datetime import timedelta

import pytest
from support.seed import T0, make_session_with_heartbeat

from hbgw.core.clock import to_ms
from hbgw.core.errors import StaleFence
from hbgw.sessions import states
from hbgw.sessions.db import make_engine
from hbgw.sessions.states import LostLockDetail, RunState
from hbgw.sessions.store import Store
from hbgw.sessions.views import FireStart

ROUNDS = 10
NOW = T0 + timedelta(minutes=10)


def _claim(store: Store, sid: str, fire_id: str, due_ms: int, fence: int) -> str:
    """What one grant's ``begin_fire`` got back, by type name (``StaleFence``: it came second
    to a newer grant, whose fence it could no longer claim)."""
    start = FireStart(store.sessions.get_session(sid).conversation, lambda _: "p", 0)
    try:
        return type(
            store.ledger.begin_fire(sid, fence, fire_id, due_ms, NOW, start).outcome
        ).__name__
    except StaleFence:
        return "StaleFence"


def _claim_apart(url: str, sid: str, fire_id: str, due_ms: int, fence: int) -> str:
    store = Store(make_engine(url))
    try:
        return _claim(store, sid, fire_id, due_ms, fence)
    finally:
        store.close()


def _check_one_reservation(store: Store, sid: str, outcomes: list[str]) -> None:
    """``outcomes`` are the type names of what each grant got back."""
    assert outcomes.count("Started") == 1, outcomes
    assert set(outcomes) <= {"Started", "Duplicate", "StaleFence"}, outcomes
    [run] = store.ledger.runs(sid)
    count = store.heartbeats.heartbeat_status(sid, T0).to_json()["fire_count"]
    if "Duplicate" in outcomes:  # the newer grant came second: the older one's turn is cut off
        assert (run.state, run.detail, count) == (
            RunState.FAILED,
            LostLockDetail.BEFORE_DELIVERY,
            1,
        )
    else:
        assert (run.state, count) == (RunState.STARTED, 1)


def test_two_threads_claim_same_fire_id(store: Store) -> None:
    for _ in range(ROUNDS):
        sid = make_session_with_heartbeat(store)
        due = to_ms(NOW)
        fire_id = states.fire_id(sid, due)
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def go(
            fence: int,
            sid: str = sid,
            fire_id: str = fire_id,
            due: int = due,
            barrier: threading.Barrier = barrier,
            outcomes: list[str] = outcomes,
        ) -> None:
            barrier.wait()
            outcomes.append(_claim(store, sid, fire_id, due, fence))

        threads = [threading.Thread(target=go, args=(f,)) for f in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        _check_one_reservation(store, sid, outcomes)


@pytest.mark.postgres
def test_two_processes_claim_same_fire_id(pg_schema_url: str) -> None:
    from hbgw.sessions.db import upgrade

    engine = make_engine(pg_schema_url)
    upgrade(engine)
    store = Store(engine)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        for _ in range(ROUNDS // 2):
            sid = make_session_with_heartbeat(store)
            due = to_ms(NOW)
            args = [(pg_schema_url, sid, states.fire_id(sid, due), due, fence) for fence in (1, 2)]
            outcomes = pool.starmap(_claim_apart, args)
            _check_one_reservation(store, sid, outcomes)
    store.close()
