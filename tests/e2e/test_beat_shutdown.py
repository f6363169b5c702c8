"""Issue 7, defect 7: a real `hbgw beat` stops on SIGTERM every time, even in the middle of a tick.

The signal once closed the Redis client under a read; the error was swallowed by the tick's
error handler and beat kept ticking. Shutdown is now a flag the loop honours.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
import redis
from support.harness import Gateway, gateway_settings, wait_until

from hbgw.procs import spawn_hbgw, stop_all

pytestmark = pytest.mark.timeout(300)

STARTS = 10
BUSY_SESSIONS = 3000


def _keep_ticks_busy(gw: Gateway) -> None:
    """Every tick sweeps thousands of inboxes (locked, so nothing is sent): the main thread
    spends most of its time inside Redis reads, where the signal used to land."""
    client, keys = gw.rt.client, gw.rt.keys
    # Live for the whole test: a registry score far in the future.
    gw.rt.registry.refresh("ghost", gw.rt.now_ms() + 10**9)
    pipe = client.pipeline(transaction=False)
    for i in range(BUSY_SESSIONS):
        sid = f"busy-{i}"
        pipe.sadd(keys.inbox_sessions(), sid)
        pipe.rpush(keys.inbox(sid), "1")
        pipe.set(keys.lock(sid), "someone-else")
    pipe.execute()


def _wait_ticking(log: Path, what: str) -> None:
    wait_until(lambda: log.read_text(errors="replace").count("restore.done") >= 2, 60, what)


def test_beat_exits_promptly_on_sigterm_while_ticking(
    tmp_path: Path, redis_url: str, redis_ns: str, redis_client: redis.Redis
) -> None:
    # A restore pass every tick: its second "restore.done" shows beat in its loop after one tick
    # rather than after FAST's second (each start then ticks busily for 0.2 s, not a second).
    settings = gateway_settings(tmp_path, redis_url, redis_ns, restore_interval=0.2)
    gw = Gateway(settings, redis_url)
    _keep_ticks_busy(gw)
    try:
        for attempt in range(STARTS):
            log = tmp_path / f"beat{attempt}.log"
            proc = spawn_hbgw(["beat"], env=gw.env(), log=log)
            try:
                _wait_ticking(log, f"beat {attempt} to tick")
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    pytest.fail(f"beat {attempt} ignored SIGTERM:\n{log.read_text()[-3000:]}")
                assert proc.returncode == 0, log.read_text()[-3000:]
            finally:
                stop_all([proc], timeout=5)
            assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
    finally:
        gw.close()
