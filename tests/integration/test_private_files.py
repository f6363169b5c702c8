"""Issue 15, hole 8: under a umask of 022 what HBGW_HOME holds is still private — the home and
its directories 0700, the SQLite file (and its WAL), the logs, the JSON-lines files and
``redis.url`` 0600: they hold messages, replies and the embedded Redis's password."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.seed import T0

from hbgw.core.jsonl import append_line
from hbgw.procs import spawn_module
from hbgw.sessions.store import Store
from hbgw.state.runtime import write_redis_url
from hbgw.up import home_lock


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    before = os.umask(0o022)
    yield
    os.umask(before)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_home_and_its_lock_are_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with home_lock(home):
        assert mode(home) == 0o700
        assert mode(home / "up.lock") == 0o600


def test_the_sqlite_file_and_its_wal_are_private(tmp_path: Path) -> None:
    path = tmp_path / "data" / "hbgw.sqlite3"
    store = Store.from_url(f"sqlite:///{path}")
    try:
        store.sessions.create_session(platform="cli", chat="me", thread=None, now=T0)
        assert mode(path.parent) == 0o700
        assert mode(path) == 0o600
        assert mode(path.with_name(path.name + "-wal")) == 0o600
    finally:
        store.close()


def test_logs_jsonl_files_and_the_redis_url_are_private(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    child = spawn_module("json.tool", ["--help"], env=dict(os.environ), log=log)
    assert child.wait(60) == 0
    append_line(tmp_path / "deliveries.jsonl", {"text": "a reply"})
    write_redis_url(tmp_path / "home", "redis://:pw@127.0.0.1:1/0")
    assert mode(log) == 0o600
    assert mode(tmp_path / "deliveries.jsonl") == 0o600
    assert mode(tmp_path / "home" / "redis.url") == 0o600
