"""`hbgw up`: everything on one machine, as real child processes, with a clean shutdown."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen
from types import FrameType

from core.embedded import EmbeddedRedis
from core.settings import Settings
from hbgw.procs import settings_env, spawn_hbgw, stop_all
from sessions.db import ensure_schema, make_engine
from state.runtime import write_redis_url


@dataclass
class Stack:
    settings: Settings
    redis_url: str
    env: dict[str, str]
    logs: Path
    procs: dict[str, Popen[bytes]] = field(default_factory=dict)

    def start(self, role: str, args: list[str]) -> Popen[bytes]:
        proc = spawn_hbgw(args, env=self.env, log=self.logs / f"{role}.log")
        self.procs[role] = proc
        return proc

    def start_worker(self, name: str) -> Popen[bytes]:
        return self.start(name, ["worker", "--name", name])

    def stop(self) -> None:
        stop_all(list(self.procs.values()))


def _terminate_on_signals() -> None:
    # SIGTERM becomes SystemExit so every `finally` runs: children stop, Redis stops.
    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    # A shell starting us in the background ignores SIGINT for us; Ctrl-C must still stop us.
    signal.signal(signal.SIGINT, signal.default_int_handler)


@contextmanager
def local_stack(
    settings: Settings,
    *,
    workers: int = 2,
    beat: bool = True,
    env_extra: dict[str, str] | None = None,
) -> Iterator[Stack]:
    """Embedded Redis (unless HBGW_REDIS_URL), SQLite (unless HBGW_DATABASE_URL), beat, workers."""
    _terminate_on_signals()
    home = settings.home
    home.mkdir(parents=True, exist_ok=True)
    logs = home / "logs"
    logs.mkdir(exist_ok=True)
    engine = make_engine(settings.effective_database_url)
    ensure_schema(engine)
    engine.dispose()
    redis_server = None
    url = settings.redis_url
    if not url:
        redis_server = EmbeddedRedis(home)
        url = redis_server.start()
        write_redis_url(home, url)
    env = settings_env(settings, redis_url=url)
    env.update(env_extra or {})
    stack = Stack(settings=settings, redis_url=url, env=env, logs=logs)
    try:
        if beat:
            stack.start("beat", ["beat"])
        for i in range(1, workers + 1):
            stack.start_worker(f"w{i}")
        yield stack
    finally:
        stack.stop()
        if redis_server is not None:
            write_redis_url(home, None)
            redis_server.stop()


def wait_forever(stack: Stack) -> None:
    """Until Ctrl-C, SIGTERM, or a child dies."""
    while True:
        for role, proc in stack.procs.items():
            if proc.poll() is not None:
                raise SystemExit(f"{role} exited with {proc.returncode}; stopping everything.")
        time.sleep(0.5)
