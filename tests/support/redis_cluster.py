"""A Redis Cluster a test owns: three primaries and three replicas of the system ``redis-server``
on free loopback ports, joined by ``redis-cli --cluster create``. Only processes started here
are ever stopped; ``kill_primary`` SIGKILLs one primary, as a crashed host would go."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from support.private_redis import HOST

NODES = 6  # three primaries, a replica each
# Quick failure detection for a test; production keeps its own (15 s by default).
NODE_TIMEOUT_MS = 1000


# A node's cluster bus listens on its port + 10000, so ports stay below 55536 and both are free.
BUS_OFFSET = 10000


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def _cluster_port(taken: set[int]) -> int:
    while True:
        port = random.randrange(20000, 65535 - BUS_OFFSET)
        if port not in taken and _free(port) and _free(port + BUS_OFFSET):
            return port


def cluster_binaries() -> tuple[str, str] | None:
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    return (server, cli) if server and cli else None


class LocalCluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ports: list[int] = []
        for _ in range(NODES):
            self.ports.append(_cluster_port(set(self.ports)))
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        return f"redis+cluster://{HOST}:{self.ports[0]},{HOST}:{self.ports[1]}/"

    def start(self) -> None:
        binaries = cluster_binaries()
        assert binaries is not None
        server, cli = binaries
        for port in self.ports:
            self.processes[port] = self._node(server, port)
        for port in self.ports:
            self._wait_answers(port)
        subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *(f"{HOST}:{p}" for p in self.ports),
                "--cluster-replicas",
                "1",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.wait_healthy()

    def _node(self, server: str, port: int) -> subprocess.Popen[bytes]:
        folder = self.directory / str(port)
        folder.mkdir(parents=True, exist_ok=True)
        argv = [
            server,
            "--port", str(port),
            "--bind", HOST,
            "--dir", str(folder),
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(folder / "nodes.conf"),
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
            "--save", "",
            "--appendonly", "no",
        ]  # fmt: skip
        with (folder / "server.log").open("ab") as log:
            return subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )

    def node(self, port: int) -> redis.Redis:
        return redis.Redis(HOST, port, decode_responses=True, socket_timeout=2)

    def _wait_answers(self, port: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.node(port).ping():
                    return
            except redis.RedisError:
                time.sleep(0.02)
        raise AssertionError(f"cluster node on port {port} did not start")

    def alive(self) -> list[int]:
        return [p for p, proc in self.processes.items() if proc.poll() is None]

    def _info(self, port: int) -> dict[str, Any]:
        try:
            return dict(self.node(port).cluster("info"))
        except redis.RedisError:
            return {}

    def primaries(self) -> list[int]:
        """Ports of the live nodes that are primaries holding slots."""
        found = []
        for port in self.alive():
            try:
                role = self.node(port).role()
            except redis.RedisError:
                continue
            if role[0] == "master" and self._info(port).get("cluster_state") == "ok":
                found.append(port)
        return sorted(found)

    def _replicas_in_sync(self) -> bool:
        """Every live replica's link to its primary is up: a replica still in its first full
        sync refuses to fail over ("disconnected from master for longer than allowed"), so a
        primary killed before then would never be replaced (seen on a loaded machine)."""
        for port in self.alive():
            try:
                info = self.node(port).info("replication")
            except redis.RedisError:
                return False
            if info.get("role") == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Every live node says ``cluster_state:ok``, three primaries serve the slots and every
        live replica is in sync with its primary."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = [self._info(p).get("cluster_state") for p in self.alive()]
            healthy = states and all(s == "ok" for s in states) and len(self.primaries()) == 3
            if healthy and self._replicas_in_sync():
                return
            time.sleep(0.1)
        raise AssertionError("the cluster did not become healthy")

    def kill_primary(self, port: int) -> None:
        process = self.processes[port]
        process.kill()
        process.wait(10)

    def wait_failover(self, old_port: int, timeout: float = 60.0) -> float:
        """Seconds until a replica took the dead primary's slots and the cluster is ok."""
        started = time.monotonic()
        self.wait_healthy(timeout)
        assert old_port not in self.primaries()
        return time.monotonic() - started

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def local_cluster(directory: Path) -> Iterator[LocalCluster]:
    """A cluster started now and stopped when the block ends; skipped (failed in CI) without
    the server binaries."""
    if cluster_binaries() is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server and redis-cli are needed for the Redis Cluster tests in CI")
        pytest.skip("redis-server/redis-cli are not installed (the cluster tests start their own)")
    cluster = LocalCluster(directory)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def redis_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A cluster of this test's own (one it may break)."""
    with local_cluster(tmp_path / "cluster") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def shared_redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One cluster for a module's tests that break nothing (each uses a namespace of its own)."""
    with local_cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster
