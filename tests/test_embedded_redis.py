"""The embedded server: starts fast on a free TCP port, answers, and leaves nothing behind."""

from __future__ import annotations

import gc
import os
import socket
from pathlib import Path

import pytest
import redis

from core.embedded import EmbeddedRedis
from core.errors import HbgwError
from state.connection import connect, ping_or_error


def port_is_closed(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return False
    except OSError:
        return True


def pings(port: int) -> bool:
    with redis.Redis(port=port, socket_timeout=1) as client:
        return bool(client.ping())


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_start_ping_stop(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path)
    url = server.start()
    port = server.port
    assert url == f"redis://127.0.0.1:{port}/0"
    assert (tmp_path / "redis").is_dir()
    client = connect(url)
    try:
        ping_or_error(client)
        client.set("k", "v")
        assert client.get("k") == "v"
        assert client.config_get("save") == {"save": ""}
    finally:
        client.close()
    assert server.start() == url  # already running: same server
    server.stop()
    assert not server.is_running()
    assert port_is_closed(port)
    server.stop()  # idempotent
    with pytest.raises(HbgwError, match="not running"):
        _ = server.url


def test_context_manager_and_restart(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path) as server:
        first = server.port
        assert pings(first)
    assert port_is_closed(first)
    with EmbeddedRedis(tmp_path) as again:  # same home, fresh server
        assert pings(again.port)


def test_two_servers_get_different_ports(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path / "a") as a, EmbeddedRedis(tmp_path / "b") as b:
        assert a.port != b.port


def test_dropped_server_is_stopped(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path)
    server.start()
    port = server.port
    process = server._process
    assert process is not None
    del server
    gc.collect()
    assert process.poll() is not None
    assert not process_exists(process.pid)
    assert port_is_closed(port)
