"""Issue 7, defect 6: an expected transient failure is one log line, never a traceback storm.

Real failures only: a Redis of the test's own that is stopped (connection refused), and a
database port nobody listens on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.harness import Gateway, gateway_settings
from support.private_redis import running_redis
from support.restoring import make_restorer

from hbgw.beat.core import BeatCore, safe_tick
from hbgw.core.clock import utcnow
from hbgw.sessions.db import make_engine
from hbgw.sessions.store import Store
from hbgw.state.connection import connect
from hbgw.state.ownership import RegistryHeartbeat
from hbgw.state.runtime import Runtime

# Loopback port 1: nothing listens there, so every connection is refused at once.
NO_DATABASE = "postgresql+psycopg://postgres@127.0.0.1:1/test?connect_timeout=2"


@pytest.fixture
def redis_down(tmp_path: Path) -> Iterator[str]:
    """The URL of a Redis that ran and was stopped: what a Redis restart looks like."""
    with running_redis(tmp_path / "redis") as server:
        url = server.url
    yield url


def _lines(caplog: pytest.LogCaptureFixture, action: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "action", None) == action]


def _assert_one_line_each(records: list[logging.LogRecord], count: int, cause: str) -> None:
    assert len(records) == count, [r.getMessage() for r in records]
    for record in records:
        assert record.levelno == logging.WARNING
        assert record.exc_info is None  # no traceback
        assert "\n" not in record.getMessage()
        assert cause in record.getMessage()


def test_beat_ticks_during_a_redis_outage_log_one_line_each(
    tmp_path: Path, redis_down: str, redis_ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    gw = Gateway(gateway_settings(tmp_path, redis_down, redis_ns), redis_down)
    core = BeatCore(gw.rt, gw.dispatcher)
    caplog.set_level(logging.INFO)
    try:
        for _ in range(3):
            assert safe_tick(core) == core.max_sleep
    finally:
        gw.close()
    _assert_one_line_each(_lines(caplog, "beat.tick_failed"), 3, "ConnectionError")


def test_a_database_outage_is_one_line_per_restore_and_settle(
    tmp_path: Path, redis_url: str, redis_ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = gateway_settings(tmp_path, redis_url, redis_ns)
    rt = Runtime(
        settings=settings, store=Store(make_engine(NO_DATABASE)), client=connect(redis_url)
    )
    caplog.set_level(logging.INFO)
    restorer = make_restorer(rt)
    try:
        now_ms = rt.now_ms()
        assert not restorer.step(now_ms).ok
        assert not restorer.step(now_ms + 1).ran  # one interval before the next try
        assert not restorer.step(now_ms + int(settings.restore_interval * 1000)).ok
        assert rt.due.settle("s-1") is None
    finally:
        rt.close()
    _assert_one_line_each(_lines(caplog, "restore.failed"), 2, "StoreError")
    settle = _lines(caplog, "index.settle_failed")
    _assert_one_line_each(settle, 1, "StoreError")
    assert getattr(settle[0], "session", None) == "s-1"


def test_registry_heartbeat_starts_and_stops_with_redis_down(
    tmp_path: Path, redis_down: str, redis_ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    gw = Gateway(gateway_settings(tmp_path, redis_down, redis_ns), redis_down)
    heartbeat = RegistryHeartbeat(gw.rt.registry, "w1", lambda: int(utcnow().timestamp()), 60)
    try:
        heartbeat.start()  # does not raise: the thread retries
        heartbeat.stop()
    finally:
        gw.close()
    _assert_one_line_each(_lines(caplog, "registry.refresh_failed"), 1, "Connection")
    _assert_one_line_each(_lines(caplog, "registry.remove_failed"), 1, "Connection")
