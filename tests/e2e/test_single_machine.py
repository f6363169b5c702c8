"""One machine, one home: one `hbgw up`, a stale embedded server found again, unique workers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from subprocess import Popen

import pytest
from support.harness import Gateway, gateway_settings, wait_until

from hbgw.core.embedded import EmbeddedRedis
from hbgw.procs import spawn_hbgw, stop_all

pytestmark = pytest.mark.timeout(300)


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


def alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return ") Z " not in stat.read_text()  # a zombie has exited
    except OSError:
        return False


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def stop_embedded(home: Path) -> None:
    """Stop the server a crashed `up` left in ``home``, if any (adopted, then stopped)."""
    server = EmbeddedRedis(home)
    server.start()
    server.stop()


@contextmanager
def up(home: Path, env: dict[str, str], name: str) -> Iterator[tuple[Popen[bytes], Path]]:
    """`hbgw up` as a person runs it, until "Ready."; SIGINT (then SIGKILL) when left."""
    out = home.parent / f"{name}.out"
    with out.open("wb") as log:
        proc = Popen([sys.executable, "-m", "hbgw", "up"], env=env, stdout=log, stderr=log)
    try:
        wait_until(lambda: "Ready." in out.read_text() or proc.poll() is not None, 90, name)
        assert proc.poll() is None, out.read_text()
        yield proc, out
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def test_one_up_per_home_and_a_crashed_ups_server_is_reused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBGW_")}
    env.update({"HBGW_HOME": str(home), "HBGW_NAMESPACE": f"sm{os.getpid()}"})
    url_file, pid_file = home / "redis.url", home / "redis" / "server.pid"
    with ExitStack() as cleanup:
        # Whatever happens, the server this test's `up` started does not outlive the test.
        cleanup.callback(stop_embedded, home)
        first, _ = cleanup.enter_context(up(home, env, "first"))
        url, server = url_file.read_text(), int(pid_file.read_text().split()[0])

        second = run_hbgw("up", env=env, timeout=45)
        assert second.returncode == 2, second.stderr[-2000:]
        assert second.stderr.strip().splitlines()[-1] == (
            f"Error: Another `hbgw up` (pid {first.pid}) is running on {home} — stop it first, "
            "or set HBGW_HOME to another directory for this one."
        )
        assert url_file.read_text() == url and first.poll() is None

        children = [p for p in children_of(first.pid) if p != server]
        first.send_signal(signal.SIGKILL)  # no clean-up runs: the server stays, redis.url too
        first.wait(10)
        wait_until(lambda: not any(alive(p) for p in children), 60, "beat and workers to exit")
        assert alive(server) and url_file.read_text() == url

        third, out = cleanup.enter_context(up(home, env, "third"))
        assert f"(embedded, reused: pid {server}, left by an earlier up)" in out.read_text()
        assert url_file.read_text() == url
        sid = run_hbgw("session", "create", "--platform", "cli", "--chat", "me", env=env)
        assert run_hbgw("send", sid.stdout.strip(), "hi", env=env).stdout.strip() == "echo: hi"
        third.send_signal(signal.SIGINT)
        assert third.wait(60) in (0, 130), out.read_text()
        wait_until(lambda: not alive(server), 30, "the reused server to stop")
        assert not url_file.exists() and not pid_file.exists()
