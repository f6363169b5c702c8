"""Two reservers of one fire id: exactly one ledger row and one count, whatever the timing."""

from __future__ import annotations

import multiprocessing
import threading
from datetime import timedelta

import pytest
from support.seed import T0, make_session_with_heartbeat

from core.clock import to_ms
from sessions import states
from sessions.db import make_engine
from sessions.store import Store

ROUNDS = 10


def _reserve(url: str, sid: str, fire_id: str, due_ms: int, fence: int) -> str:
    store = Store(make_engine(url))
    try:
        outcome = store.reserve_fire(sid, fire_id, due_ms, fence, T0 + timedelta(minutes=10))
        return type(outcome).__name__
    finally:
        store.close()


def _check_one_reservation(store: Store, sid: str, outcomes: list[str]) -> None:
    """``outcomes`` are the type names of what each reserver got back."""
    assert outcomes.count("Reserved") == 1, outcomes
    assert set(outcomes) <= {"Reserved", "Duplicate", "Refused"}, outcomes
    assert len(store.runs(sid)) == 1
    assert store.heartbeat_status(sid, T0).to_json()["fire_count"] == 1


def test_two_threads_reserve_same_fire_id(store: Store) -> None:
    for _ in range(ROUNDS):
        sid = make_session_with_heartbeat(store)
        due = to_ms(T0 + timedelta(minutes=10))
        fire_id = states.fire_id(sid, due)
        # Both carry the claimed fence, so only the UNIQUE fire id can decide between them.
        store.claim_fence(sid, 1, T0)
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
            now = T0 + timedelta(minutes=10)
            outcomes.append(type(store.reserve_fire(sid, fire_id, due, fence, now)).__name__)

        threads = [threading.Thread(target=go, args=(f,)) for f in (1, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        _check_one_reservation(store, sid, outcomes)


@pytest.mark.postgres
def test_two_processes_reserve_same_fire_id(pg_schema_url: str) -> None:
    from sessions.db import upgrade

    engine = make_engine(pg_schema_url)
    upgrade(engine)
    store = Store(engine)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        for _ in range(ROUNDS // 2):
            sid = make_session_with_heartbeat(store)
            due = to_ms(T0 + timedelta(minutes=10))
            store.claim_fence(sid, 1, T0)
            args = [(pg_schema_url, sid, states.fire_id(sid, due), due, fence) for fence in (1, 1)]
            outcomes = pool.starmap(_reserve, args)
            _check_one_reservation(store, sid, outcomes)
    store.close()
