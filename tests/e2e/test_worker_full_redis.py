"""Issue 7, defect 1: a full Redis must not stop a real `hbgw worker` process for good."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.harness import Gateway, gateway_settings, wait_until
from support.private_redis import running_redis

from hbgw.procs import spawn_hbgw, stop_all
from hbgw.sessions.states import RunState

pytestmark = pytest.mark.timeout(240)


def _riding_it_out(log: Path) -> bool:
    """Waiting for room: to register its name (a worker started against the full Redis), or
    to consume (the broker refusing it after it started)."""
    text = log.read_text(errors="replace")
    return "registry.claim_retry" in text or text.count("worker.broker_retry") >= 2


def test_worker_rides_out_a_full_redis_and_works_again(tmp_path: Path, redis_ns: str) -> None:
    with running_redis(
        tmp_path / "redis", "--maxmemory", "2mb", "--maxmemory-policy", "noeviction"
    ) as server:
        gw = Gateway(gateway_settings(tmp_path, server.url, redis_ns, agent="echo"), server.url)
        sid = gw.session()
        gw.heartbeat(sid, seconds=60)
        assert server.fill() > 0
        log = tmp_path / "worker.log"
        proc = spawn_hbgw(["worker", "--name", "w1"], env=gw.env(), log=log)
        try:
            wait_until(
                lambda: proc.poll() is not None or _riding_it_out(log),
                90,
                "the worker to meet the full Redis",
            )
            assert proc.poll() is None, log.read_text()[-3000:]
            text = log.read_text()
            assert "Unrecoverable error" not in text
            server.raise_memory()
            wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1"], 60, "w1 live")
            gw.due_now(sid, seconds=60)

            def completed() -> bool:
                gw.tick()
                return any(r.state == RunState.COMPLETED for r in gw.runs(sid))

            wait_until(completed, 90, "a fire to complete once memory is back")
            assert proc.poll() is None
        finally:
            stop_all([proc], timeout=20)
            gw.close()
    # Each failed attempt is one line; nothing of the full Redis is a traceback.
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
