"""`hbgw up` as a real process with its own HBGW_HOME: started, waited for, stopped by SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.harness import wait_until


def user_env(home: Path, **settings: str) -> dict[str, str]:
    """The environment of a person's shell: no HBGW_ or PYTHON variables of the test run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HBGW_", "PYTHON"))}
    env.update({"HBGW_HOME": str(home), **settings})
    return env


@contextmanager
def hbgw_up(home: Path, **settings: str) -> Iterator[dict[str, Any]]:
    """Yield the API address `hbgw up` wrote (``HBGW_HOME/api.json``) once it is ready."""
    env = user_env(home, HBGW_NAMESPACE=f"up{os.getpid()}", **settings)
    log_path = home / "up.out"
    with log_path.open("w") as log:
        up = subprocess.Popen(
            [sys.executable, "-m", "hbgw", "up"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            wait_until(lambda: "Ready." in log_path.read_text() or up.poll() is not None, 60, "up")
            assert up.poll() is None, log_path.read_text()
            wait_until(lambda: (home / "api.json").exists(), 30, "api.json")
            started = children_of(up.pid)
            yield json.loads((home / "api.json").read_text())
        finally:
            up.send_signal(signal.SIGTERM)
            code = up.wait(60)
    assert code in (0, 128 + signal.SIGTERM), log_path.read_text()
    wait_until(lambda: not any(alive(pid) for pid in started), 30, "every child of up to exit")
    assert not (home / "api.json").exists()


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and ") Z " not in stat.read_text()
