"""`hbgw up`: everything on one machine, as real child processes, with a clean shutdown.

One `up` per home: ``up.lock`` is locked (fcntl) for the life of the process and names its
pid, so a second `up` on the same HBGW_HOME is refused, and a crashed one, however it died,
leaves no lock behind. Its embedded server, which outlives a SIGKILL, is found and reused by
the next `up` (``core.embedded``).
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen
from types import FrameType

from hbgw import local_api
from hbgw.core.embedded import EmbeddedRedis
from hbgw.core.errors import BadInput
from hbgw.core.private import open_private, private_dir
from hbgw.core.settings import Settings
from hbgw.local_api import LocalApi
from hbgw.procs import secrets_env, settings_env, spawn_hbgw, stop_all
from hbgw.sessions.db import ensure_schema, make_engine
from hbgw.state.runtime import write_redis_url

LOCK_FILE = "up.lock"


@dataclass
class Stack:
    settings: Settings
    redis_url: str
    env: dict[str, str]
    logs: Path
    procs: dict[str, Popen[bytes]] = field(default_factory=dict)
    redis_reused: int | None = None
    """The pid of an embedded server left running by an earlier `up` and reused."""
    api: LocalApi | None = None

    def start(self, role: str, args: list[str], *, kind: str | None = None) -> Popen[bytes]:
        """Start `hbgw ARGS` as ``role``; ``kind`` (``worker``, ``beat``; the role by default)
        chooses the secrets it is given."""
        env = {**self.env, **secrets_env(self.settings, kind or role)}
        if self.settings.metrics_port:
            # One /metrics port each (beat: the port, worker i: port + i): on a shared port
            # every role after the first would fail at start.
            port = self.settings.metrics_port + len(self.procs)
            env = {**env, "HBGW_METRICS_PORT": str(port)}
        proc = spawn_hbgw(args, env=env, log=self.logs / f"{role}.log")
        self.procs[role] = proc
        return proc

    def start_worker(self, name: str) -> Popen[bytes]:
        return self.start(name, ["worker", "--name", name], kind="worker")

    def start_api(self) -> LocalApi:
        """`hbgw api` on loopback, with its token in its environment only; answers /healthz."""
        api = local_api.plan(self.settings)
        env = {**self.env, **api.env(self.settings)}
        log = self.logs / "api.log"
        try:
            proc = spawn_hbgw(api.args(), env=env, log=log, pass_fds=(api.listener.fileno(),))
        finally:
            api.listener.close()  # the child holds it now; our copy would outlive a dead child
        self.procs["api"] = proc
        local_api.wait_ready(api, proc, log)
        local_api.write_file(self.settings.home, api)
        self.api = api
        return api

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
def home_lock(home: Path) -> Iterator[None]:
    """Hold ``home/up.lock`` (with our pid in it), or refuse: another `up` runs on this home."""
    private_dir(home)
    fd = open_private(home / LOCK_FILE, os.O_RDWR)  # not inherited by children
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise BadInput(
                f"Another `hbgw up` (pid {holder}) is running on {home} — stop it first, or "
                "set HBGW_HOME to another directory for this one."
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # the lock goes with it; the file stays (unlinking it would race)


@contextmanager
def local_stack(
    settings: Settings,
    *,
    workers: int = 2,
    beat: bool = True,
    env_extra: dict[str, str] | None = None,
    api: bool = False,
) -> Iterator[Stack]:
    """Embedded Redis (unless HBGW_REDIS_URL), SQLite (unless HBGW_DATABASE_URL), beat, workers,
    and with ``api`` the HTTP API on loopback."""
    if workers:
        preflight(settings)
    _terminate_on_signals()
    with home_lock(settings.home), _stack(settings, workers, beat, env_extra) as stack:
        try:
            if api:
                stack.start_api()
            yield stack
        finally:
            local_api.remove_file(settings.home)


@contextmanager
def _stack(
    settings: Settings, workers: int, beat: bool, env_extra: dict[str, str] | None
) -> Iterator[Stack]:
    home = settings.home
    logs = home / "logs"
    private_dir(logs)
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
    stack.redis_reused = redis_server.adopted if redis_server is not None else None
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


def preflight(settings: Settings) -> None:
    """What would stop a worker at start stops `up` before anything starts, with the worker's
    own sentence: the agent's settings, the platforms HBGW_PLATFORMS names."""
    from hbgw.gateway.platforms.served import Served
    from hbgw.workers.agents import make_agent

    make_agent(settings)
    Served.from_settings(settings)


def wait_forever(stack: Stack) -> None:
    """Until Ctrl-C, SIGTERM, or a child dies; its own last words are said in the terminal,
    not only in its log (issue 20: "exited with 2" told a newcomer nothing)."""
    while True:
        for role, proc in stack.procs.items():
            if proc.poll() is not None:
                why = last_words(stack.logs / f"{role}.log")
                said = f"\n  {why}" if why else ""
                raise SystemExit(
                    f"{role} exited with {proc.returncode}; stopping everything.{said}\n"
                    f"  Its log: {stack.logs / f'{role}.log'}"
                )
        time.sleep(0.5)


def last_words(log: Path, tail_bytes: int = 8192) -> str:
    """The sentence a child printed before exiting: its log's last ``Error: …`` line, else its
    last line; '' when the log is empty or gone."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, log.stat().st_size - tail_bytes))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    lines = [line.strip() for line in lines if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    return (errors or lines or [""])[-1][:500]
