"""The embedded server: starts fast on a free TCP port, answers, and leaves nothing behind."""

from __future__ import annotations

import gc
import os
import socket
import warnings
from pathlib import Path

import pytest
import redis

from hbgw.core.embedded import EmbeddedRedis
from hbgw.core.errors import HbgwError
from hbgw.state.connection import connect, ping_or_error


def port_is_closed(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return False
    except OSError:
        return True


def pings(server: EmbeddedRedis) -> bool:
    with redis.Redis(port=server.port, password=server.password, socket_timeout=1) as client:
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
    assert url == f"redis://:{server.password}@127.0.0.1:{port}/0"
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
        assert pings(server)
    assert port_is_closed(first)
    with EmbeddedRedis(tmp_path) as again:  # same home, fresh server
        assert pings(again)


def test_two_servers_get_different_ports(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path / "a") as a, EmbeddedRedis(tmp_path / "b") as b:
        assert a.port != b.port


def test_dropped_server_is_stopped(tmp_path: Path) -> None:
    # The collection below would also finalise what earlier tests left for the collector, and
    # blame this test for their unclosed sockets: collected first, their warnings not this test's.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
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


def test_the_server_asks_for_the_homes_private_password(tmp_path: Path) -> None:
    """Issue 15, hole 8: another local user reaching the loopback port gets nothing without
    the password, which is 0600 in the home and on no command line."""
    home = tmp_path / "home"
    with EmbeddedRedis(home) as server:
        stranger = redis.Redis(port=server.port, socket_timeout=1)
        with stranger, pytest.raises(redis.AuthenticationError):
            stranger.get("k")
        assert pings(server)
        password_file = home / "redis" / "password"
        assert password_file.read_text().strip() == server.password
        for private in (password_file, home / "redis" / "valkey.conf", server.log_path):
            assert private.stat().st_mode & 0o777 == 0o600, private
        assert (home / "redis").stat().st_mode & 0o777 == 0o700
        process = server._process
        assert process is not None
        assert server.password not in Path(f"/proc/{process.pid}/cmdline").read_text()
        first = server.password
    with EmbeddedRedis(home) as again:  # the home keeps its password
        assert again.password == first and pings(again)
