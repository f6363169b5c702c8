"""Issue 15, hole 1: SQLite's "database is locked" is transient, like a dropped connection.

Another *process* holds the write lock of a real SQLite file (``BEGIN IMMEDIATE``) for longer
than the store's busy timeout: the store's transaction is repeated, bounded, and succeeds once
the lock is free; a lock that never frees still ends as one ``StoreError`` sentence.
"""

from __future__ import annotations

import logging
import multiprocessing
import sqlite3
from collections.abc import Iterator
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from support.seed import T0

from hbgw.core.errors import StoreError
from hbgw.sessions.db import make_engine, upgrade
from hbgw.sessions.store import Store

BUSY_TIMEOUT_MS = 1000  # the store's wait per attempt in this test (production: 30 s)
HOLD_LIMIT_S = 60.0  # the holder gives up on its own after this, whatever the test does


def _hold_write_lock(path: str, held: Event, release: Event) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    held.set()
    release.wait(HOLD_LIMIT_S)
    conn.execute("COMMIT")
    conn.close()


@pytest.fixture
def sqlite_file(tmp_path: Path) -> str:
    return str(tmp_path / "hbgw.sqlite3")


@pytest.fixture
def store(sqlite_file: str) -> Iterator[Store]:
    engine = make_engine(f"sqlite:///{sqlite_file}")
    upgrade(engine)

    @event.listens_for(engine, "connect")
    def _short_busy_timeout(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")

    engine.dispose()  # pooled connections are made again, with the short timeout
    yield Store(engine)
    engine.dispose()


@pytest.fixture
def holder(sqlite_file: str) -> Iterator[tuple[Event, Event]]:
    ctx = multiprocessing.get_context("spawn")
    held, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold_write_lock, args=(sqlite_file, held, release))
    proc.start()
    try:
        assert held.wait(30), "the holder process never took the write lock"
        yield held, release
    finally:
        release.set()
        proc.join(HOLD_LIMIT_S + 10)


class _ReleaseOnRetry(logging.Handler):
    """Frees the lock as soon as the store says it will try again."""

    def __init__(self, release: Event) -> None:
        super().__init__()
        self.free = release
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "action", None) == "store.retry":
            self.retries += 1
            self.free.set()


def test_a_write_waits_out_another_process_holding_the_lock(
    store: Store, holder: tuple[Event, Event]
) -> None:
    _, release = holder
    handler = _ReleaseOnRetry(release)
    logger = logging.getLogger("hbgw.store")
    logger.addHandler(handler)
    try:
        session = store.sessions.create_session(platform="slack", chat="C1", thread="T1", now=T0)
    finally:
        logger.removeHandler(handler)
    assert handler.retries >= 1  # the first attempt met the lock, and was repeated
    assert store.sessions.get_session(session.id).chat == "C1"


def test_a_lock_that_never_frees_is_one_store_error(
    store: Store, holder: tuple[Event, Event]
) -> None:
    with pytest.raises(StoreError, match="stayed locked by another writer during create_session"):
        store.sessions.create_session(platform="slack", chat="C1", thread="T1", now=T0)
