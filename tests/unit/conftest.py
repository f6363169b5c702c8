"""The unit tier: pure rules, grammar, state machines, parsers, settings, static checks of the
repository. No server and no process: a unit test that opens a connection (TCP or a unix
socket), starts a process or opens a SQLite database fails here, naming the tier it belongs in.
That keeps `make test-fast` fast and its failures about rules, never about a server."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
from collections.abc import Iterator
from typing import Any, NoReturn

# croniter's first import asks platform.architecture(), which runs `file` in a process: imported
# here, before the guard below, a unit test that reaches the cron grammar first does not trip it.
import croniter  # noqa: F401
import pytest


class NeedsAnotherTier(AssertionError):
    pass


def _refused(what: str) -> Any:
    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise NeedsAnotherTier(
            f"A unit test {what}; move it to tests/integration (a server, SQL) or tests/e2e "
            "(our processes)."
        )

    return refuse


@pytest.fixture(autouse=True)
def _no_servers_or_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _refused("opened a connection"))
    monkeypatch.setattr(socket.socket, "connect_ex", _refused("opened a connection"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refused("started a process"))
    monkeypatch.setattr(sqlite3, "connect", _refused("opened a SQLite database"))
    yield
