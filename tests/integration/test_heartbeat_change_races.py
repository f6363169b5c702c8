"""Issue 15, hole 2: pause, clear and a reservation of the same heartbeat, concurrent on
PostgreSQL, in an explicit interleaving.

The reservation reads the heartbeat row and stops before it writes; the pause or clear then
runs in another transaction. Without a row lock the change commits at
once and the reservation, resumed, writes over it: a paused heartbeat left with a due time (the
restore pass puts it back in the index). With the lock the change waits for the reservation
and applies after it: the row is what the two give in order.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, text
from support.seed import T0, make_session_with_heartbeat
from support.sql_fixtures import PG_URL

from hbgw.core.clock import to_ms
from hbgw.sessions import states
from hbgw.sessions.db import make_engine, upgrade
from hbgw.sessions.store import Store
from hbgw.sessions.views import FireStart, Started

pytestmark = pytest.mark.postgres

WAIT_S = 30.0  # a bound on each step; each takes milliseconds
DUE = T0 + timedelta(minutes=10)


@pytest.fixture
def stores(pg_schema_url: str) -> Iterator[tuple[Store, Store, str]]:
    """Two stores on one schema: the reserver's and the changer's (own application name)."""
    changer_app = "hbgw-change-" + uuid.uuid4().hex[:8]
    reserver = Store(make_engine(pg_schema_url))
    upgrade(reserver.engine)
    changer = Store(make_engine(f"{pg_schema_url}&application_name={changer_app}"))
    yield reserver, changer, changer_app
    reserver.close()
    changer.close()


@pytest.fixture
def admin() -> Iterator[Engine]:
    engine = create_engine(PG_URL)
    yield engine
    engine.dispose()


def _stop_after_heartbeat_read(engine: Engine) -> tuple[threading.Event, threading.Event]:
    """The reservation's transaction stops once it has read the heartbeat row (and has not
    written yet) until ``go`` is set."""
    reached, go = threading.Event(), threading.Event()

    def hook(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if not reached.is_set() and "FROM heartbeats" in statement:
            reached.set()
            assert go.wait(WAIT_S), "the test never let the reservation go on"

    event.listen(engine, "after_cursor_execute", hook)
    return reached, go


def _done_or_waiting_on_a_lock(admin: Engine, app: str, done: threading.Event) -> None:
    query = text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE application_name = :a AND wait_event_type = 'Lock'"
    )
    for _ in range(int(WAIT_S / 0.01)):
        with admin.connect() as conn:
            if done.is_set() or conn.execute(query, {"a": app}).scalar_one():
                return
        done.wait(0.01)
    raise AssertionError("the change neither finished nor waited on a lock")


def _run(target: Callable[[], Any], done: threading.Event, errors: list[BaseException]) -> None:
    try:
        target()
    except BaseException as exc:  # reported by the test, not lost in the thread
        errors.append(exc)
    finally:
        done.set()


@pytest.mark.parametrize("change", ["pause", "clear"])
def test_a_change_is_never_overwritten_by_a_concurrent_reservation(
    stores: tuple[Store, Store, str], admin: Engine, change: str
) -> None:
    reserver, changer, changer_app = stores
    sid = make_session_with_heartbeat(reserver)
    due = to_ms(DUE)
    reached, go = _stop_after_heartbeat_read(reserver.engine)
    outcome: list[Any] = []
    errors: list[BaseException] = []
    reserved, changed = threading.Event(), threading.Event()

    def reserve() -> None:
        start = FireStart(1, lambda _: "p", 0)
        fid = states.fire_id(sid, due)
        outcome.append(reserver.ledger.begin_fire(sid, 1, fid, due, DUE, start).outcome)

    method = getattr(changer.heartbeats, f"{change}_heartbeat")
    threading.Thread(target=_run, args=(reserve, reserved, errors)).start()
    assert reached.wait(WAIT_S), errors
    threading.Thread(target=_run, args=(lambda: method(sid, DUE), changed, errors)).start()
    _done_or_waiting_on_a_lock(admin, changer_app, changed)
    go.set()
    assert reserved.wait(WAIT_S) and changed.wait(WAIT_S)
    assert not errors, errors
    assert isinstance(outcome[0], Started)
    state = changer.heartbeats.get_heartbeat(sid)
    assert state is not None
    assert state.status == ("paused" if change == "pause" else "cleared")
    assert state.fire_count == 1  # the reservation counted, then the change applied
    assert state.generation == outcome[0].run.generation + 1
    with changer.engine.connect() as conn:
        stored_due = conn.execute(
            text("SELECT next_due_at FROM heartbeats WHERE session_id = :s"), {"s": sid}
        ).scalar_one()
    assert stored_due is None  # not put back in the index by the restore pass
