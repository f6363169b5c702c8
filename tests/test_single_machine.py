"""One machine, one home: one `hbgw up`, a stale embedded server found again, unique workers."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.harness import Gateway, gateway_settings, wait_until

from hbgw.procs import spawn_hbgw, stop_all

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def run_hbgw(
    *args: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hbgw", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_second_worker_with_a_live_name_is_refused(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    gw = Gateway(gateway_settings(tmp_path, redis_url, redis_ns, agent="echo"), redis_url)
    host = socket.gethostname()  # the name of a worker started without --name
    first = spawn_hbgw(["worker"], env=gw.env(), log=tmp_path / "first.log")
    try:
        wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == [host], 60, "the worker")
        second = run_hbgw("worker", env=gw.env())
        assert second.returncode == 2, second.stderr[-2000:]
        assert second.stderr.strip().splitlines()[-1] == (
            f"Error: A worker named {host!r} is already running (its registry entry is fresh) "
            "— give this one another name with --name."
        )
        assert first.poll() is None and gw.rt.registry.live(gw.rt.now_ms()) == [host]
        # A crashed worker's name is free again once its entry goes stale: a supervisor that
        # restarts it at once is not refused.
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        first = spawn_hbgw(["worker"], env=gw.env(), log=tmp_path / "restarted.log")
        wait_until(
            lambda: "ready" in (tmp_path / "restarted.log").read_text(), 60, "the restarted worker"
        )
        assert first.poll() is None
    finally:
        stop_all([first], timeout=20)
        gw.close()
