"""The deployment under test: its own Redis and the `hbgw` role processes, and nothing else.

Every signal goes to a process this harness started, through its own ``Popen`` handle; a role
that exits without the harness having killed it is recorded and left down, so the checks see it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos.evidence import ProcessExit
from hbgw.core.embedded import EmbeddedRedis
from hbgw.core.errors import HbgwError
from hbgw.core.private import private_dir
from hbgw.procs import spawn_hbgw, stop_all


class PinnedRedis(EmbeddedRedis):
    """The embedded server, restartable on the port it first had: clients reconnect to the same
    URL and find an empty server, as after a crash of a Redis without persistence."""

    def restart(self, timeout: float = 10.0) -> None:
        port = self._port
        if port is None:
            raise HbgwError("The chaos Redis was never started.")
        self.stop()
        self.start_on(port, timeout)

    def start_on(self, port: int, timeout: float = 10.0) -> None:
        private_dir(self.data_dir)
        if not self._launch(port, time.monotonic() + timeout):
            raise HbgwError(f"The chaos Redis did not come back on port {port}.")


@dataclass
class Role:
    name: str
    args: list[str]
    proc: subprocess.Popen[bytes] | None = None
    # Set while the harness has taken it down on purpose (a kill waiting for its restart).
    held_down: bool = False
    paused: bool = False
    incarnations: int = 0
    env: dict[str, str] = field(default_factory=dict)  # on top of the cluster's (its proxy)
    extra: dict[str, str] = field(default_factory=dict)  # this incarnation only (a skew)


EXIT_TAIL_LINES = 40


def log_tail(path: Path, lines: int = EXIT_TAIL_LINES) -> list[str]:
    """The last ``lines`` lines of a role's log (its last incarnation's end)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]


@dataclass
class Cluster:
    env: dict[str, str]
    logs: Path
    roles: dict[str, Role] = field(default_factory=dict)
    exits: list[ProcessExit] = field(default_factory=list)
    ignored_sigterm: list[str] = field(default_factory=list)

    def add(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        self.roles[name] = Role(name, args, env=dict(env or {}))
        self.start(name)

    def start(self, name: str) -> None:
        role = self.roles[name]
        env = {**self.env, **role.env, **role.extra}
        role.proc = spawn_hbgw(role.args, env=env, log=self.logs / f"{name}.log")
        role.held_down = False
        role.incarnations += 1

    def restart(self, name: str, extra: dict[str, str], timeout: float = 15.0) -> int | None:
        """Stop a role with SIGTERM (as a deploy would) and start it again with ``extra`` in
        its environment (``{}``: as it was); the new pid, or None when it was not running."""
        role = self.roles[name]
        proc = self._running(role)
        if proc is None:
            return None
        role.held_down = True
        self.resume(name)
        stop_all([proc], timeout=timeout)
        role.extra = dict(extra)
        self.start(name)
        return role.proc.pid if role.proc is not None else None

    def kill(self, name: str) -> None:
        role = self.roles[name]
        proc = self._running(role)
        role.held_down = True
        if proc is not None:
            if role.paused:
                proc.send_signal(signal.SIGCONT)
                role.paused = False
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)

    def pause(self, name: str) -> bool:
        role = self.roles[name]
        proc = self._running(role)
        if proc is None:
            return False
        proc.send_signal(signal.SIGSTOP)
        role.paused = True
        return True

    def resume(self, name: str) -> None:
        role = self.roles[name]
        proc = self._running(role)
        if proc is not None and role.paused:
            proc.send_signal(signal.SIGCONT)
        role.paused = False

    def poll(self) -> list[ProcessExit]:
        """Roles that exited on their own since the last poll; they stay down."""
        found = []
        for role in self.roles.values():
            proc = role.proc
            if proc is None or role.held_down or proc.poll() is None:
                continue
            tail = log_tail(self.logs / f"{role.name}.log")
            found.append(ProcessExit(role.name, proc.pid, proc.returncode, time.time(), tail))
            role.proc = None
        self.exits += found
        return found

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM everything still running; a role that needed SIGKILL is noted."""
        self.poll()
        for role in self.roles.values():
            self.resume(role.name)  # a stopped process cannot act on SIGTERM
        running = {n: r.proc for n, r in self.roles.items() if self._running(r) is not None}
        stop_all([p for p in running.values() if p is not None], timeout=timeout)
        self.ignored_sigterm = [
            n for n, p in running.items() if p is not None and p.returncode == -signal.SIGKILL
        ]

    @staticmethod
    def _running(role: Role) -> subprocess.Popen[bytes] | None:
        proc = role.proc
        return proc if proc is not None and proc.poll() is None else None
