"""`hbgw up` as a person uses it: start, talk to it from another shell, Ctrl-C, nothing left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from support.harness import wait_until
from support.up_process import alive, children_of


def hbgw(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hbgw", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_up_runs_a_turn_and_stops_cleanly(tmp_path: Path) -> None:
    # As a user runs it: no PYTHONUNBUFFERED (or any PYTHON*) to hide an unflushed "Ready."
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HBGW_", "PYTHON"))}
    env.update({"HBGW_HOME": str(tmp_path), "HBGW_NAMESPACE": f"up{os.getpid()}"})
    env["HBGW_API_PORT"] = "0"  # any free port: tests run side by side
    log = (tmp_path / "up.out").open("w")
    up = subprocess.Popen(
        [sys.executable, "-m", "hbgw", "up"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        wait_until(lambda: "Ready." in (tmp_path / "up.out").read_text(), 60, "hbgw up")
        started = children_of(up.pid)
        assert len(started) >= 4  # beat, two workers, the API (and the embedded Redis)
        api = json.loads((tmp_path / "api.json").read_text())
        assert (tmp_path / "api.json").stat().st_mode & 0o777 == 0o600
        printed = (tmp_path / "up.out").read_text()
        assert api["owner"] == "local" and f"api      {api['url']}" in printed
        assert f"token    {api['token']}" in printed
        assert httpx.get(f"{api['url']}/readyz", timeout=10).status_code == 200
        bearer = {"Authorization": f"Bearer {api['token']}"}
        made = httpx.post(
            f"{api['url']}/v1/sessions", json={"platform": "cli", "chat": "me"}, headers=bearer
        )
        assert made.status_code == 201 and made.json()["owner"] == "local"
        sid = hbgw("session", "create", "--platform", "cli", "--chat", "me", env=env).stdout.strip()
        # Sent before the workers registered, it waits in the inbox for beat's sweeper.
        first = hbgw("send", sid, "hello", "--timeout", "60", env=env)
        assert first.stdout.strip() == "echo: hello", first.stderr
        answer = hbgw("send", sid, "second", "--timeout", "30", env=env)
        assert answer.stdout.strip() == "echo: second"
        set_reply = hbgw("send", sid, "/heartbeat every 5m check", env=env)
        assert set_reply.stdout.startswith("♥ Heartbeat set (every 5m)")
    finally:
        up.send_signal(signal.SIGINT)
        code = up.wait(60)
        log.close()
    assert code in (0, 130), (tmp_path / "up.out").read_text()
    wait_until(lambda: not any(alive(p) for p in started), 30, "every child to exit")
    assert not (tmp_path / "redis.url").exists()
    assert not (tmp_path / "api.json").exists()
