"""Rule 11 for ``DueSettle.settle``: only a definite answer from SQL removes a due-index entry.

The store is real and really broken (a file that is not a database, a database without the
schema, a PostgreSQL schema dropped underneath): a failing read must keep the entry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import create_engine, text
from support.harness import gateway_settings
from support.seed import T0, make_session_with_heartbeat
from support.sql_fixtures import PG_URL

from hbgw.core.clock import to_ms
from hbgw.sessions.db import make_engine, upgrade
from hbgw.sessions.store import Store
from hbgw.state.runtime import Runtime

DUE = 1_700_000_000_000


def not_a_database(tmp_path: Path) -> Store:
    path = tmp_path / "garbage.sqlite3"
    path.write_bytes(b"this file is not a database\n" * 200)
    return Store(make_engine(f"sqlite:///{path}"))


def without_schema(tmp_path: Path) -> Store:
    return Store(make_engine(f"sqlite:///{tmp_path / 'unmigrated.sqlite3'}"))


@pytest.fixture
def runtime_on(
    tmp_path: Path, redis_url: str, redis_ns: str, redis_client: redis.Redis
) -> Iterator[Callable[[Store], Runtime]]:
    stores: list[Store] = []

    def make(store: Store) -> Runtime:
        stores.append(store)
        return Runtime(gateway_settings(tmp_path, redis_url, redis_ns), store, redis_client)

    yield make
    for store in stores:
        store.close()


@pytest.mark.parametrize("broken", [not_a_database, without_schema])
def test_unreadable_store_never_prunes(
    broken: Callable[[Path], Store],
    runtime_on: Callable[[Store], Runtime],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rt = runtime_on(broken(tmp_path))
    rt.index.schedule("s-kept", DUE)
    with caplog.at_level(logging.WARNING):
        assert rt.due.settle("s-kept") is None
    assert rt.index.due_ms("s-kept") == DUE
    assert any(getattr(r, "session", None) == "s-kept" for r in caplog.records)


@pytest.mark.postgres
def test_dropped_postgres_schema_never_prunes(
    runtime_on: Callable[[Store], Runtime], pg_schema_url: str
) -> None:
    engine = make_engine(pg_schema_url)
    upgrade(engine)
    store = Store(engine)
    sid = make_session_with_heartbeat(store, now=T0)
    rt = runtime_on(store)
    assert rt.due.settle(sid) is not None
    schema = pg_schema_url.rsplit("%3D", 1)[-1]
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))  # the fixture drops it afterwards
    admin.dispose()
    due = rt.index.due_ms(sid)
    assert rt.due.settle(sid) is None
    assert rt.index.due_ms(sid) == due


def test_definite_answers_still_prune(
    runtime_on: Callable[[Store], Runtime], tmp_path: Path
) -> None:
    store = Store.from_url(f"sqlite:///{tmp_path / 'ok.sqlite3'}")
    rt = runtime_on(store)
    paused = make_session_with_heartbeat(store, now=T0)
    suspended = make_session_with_heartbeat(store, now=T0)
    for sid in (paused, suspended, "s-no-such-session"):
        rt.index.schedule(sid, DUE)
    store.heartbeats.pause_heartbeat(paused, T0)
    store.sessions.suspend(suspended, T0)
    for sid in (paused, suspended, "s-no-such-session"):
        assert rt.due.settle(sid) is None
        assert rt.index.due_ms(sid) is None
    active = make_session_with_heartbeat(store, now=T0)
    assert rt.due.settle(active) == rt.index.due_ms(active) == to_ms(T0) + 600_000
