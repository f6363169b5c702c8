"""The API of `hbgw up` owns its port from the moment it is chosen.

Defect: `up` checked that its port was free, then let the child `hbgw api` bind it. Two `up`s
starting together on one machine (CI runs them side by side) both found the default port free;
the second child failed to bind while its parent's /healthz check was answered by the first
stack's API, so the second `up` wrote a URL whose server rejected its token, then stopped.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
from support.cli_fixtures import Hbgw

from hbgw import local_api
from hbgw.core.settings import Settings
from hbgw.procs import settings_env, spawn_hbgw, stop_all


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _settings(home: Path, port: int) -> Settings:
    return Settings(home=home, channel="file", api_port=port)


def test_two_stacks_planning_together_get_two_ports(tmp_path: Path) -> None:
    port = _port()
    first = local_api.plan(_settings(tmp_path / "a", port))
    second = local_api.plan(_settings(tmp_path / "b", port))
    try:
        assert first.url == f"http://127.0.0.1:{port}"
        assert second.url != first.url  # the first one's socket holds the port already
        for api in (first, second):
            port_of = int(api.url.rsplit(":", 1)[1])
            socket.create_connection(("127.0.0.1", port_of), timeout=5).close()  # listening
    finally:
        first.listener.close()
        second.listener.close()


def test_the_api_serves_on_the_socket_it_inherits(tmp_path: Path) -> None:
    configured = _settings(tmp_path, _port())
    api = local_api.plan(configured)
    log = tmp_path / "api.log"
    env = {**os.environ, **settings_env(configured), **api.env(configured)}
    try:
        proc = spawn_hbgw(api.args(), env=env, log=log, pass_fds=(api.listener.fileno(),))
    finally:
        api.listener.close()
    try:
        local_api.wait_ready(api, proc, log)
        headers = {"Authorization": f"Bearer {api.token}"}
        answer = httpx.get(f"{api.url}/v1/sessions", headers=headers, timeout=10)
        assert answer.status_code == 200, answer.text  # our token: our server answered
        assert f"API listening on {api.url}" in log.read_text()
    finally:
        stop_all([proc])


def test_an_fd_that_is_not_a_listening_socket_is_refused_in_words(
    hbgw: Hbgw, tmp_path: Path
) -> None:
    result = hbgw("api", "--fd", "987")
    assert result.code == 2
    assert "--fd 987 is not an open socket" in result.err
    with socket.socket() as unbound:  # a socket, but nobody listens on it
        code = subprocess.run(
            [sys.executable, "-m", "hbgw", "api", "--fd", str(unbound.fileno())],
            pass_fds=(unbound.fileno(),),
            env={**os.environ, "HBGW_HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert code.returncode == 2, code.stderr
    assert "is not a listening TCP socket" in code.stderr
