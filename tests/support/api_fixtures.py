"""The `api` fixture: the HTTP API under a real uvicorn on loopback, over a real deployment
(real Redis namespace, SQLite in tmp_path, the test's Celery app for in-process workers)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from hbgw.gateway.api.app import create_app
from hbgw.gateway.public_ids import deployment_ids
from support.harness import Gateway, gateway_settings, wait_until
from support.http_server import serving

ALICE, BOB = "alice", "bob"
TOKENS = {ALICE: "tok-alice-7f3a9c", BOB: "tok-bob-52e1d0a4b8"}
ADMIN_TOKEN = "tok-admin-c0ffee"
# The Slack chats the tests' owner tokens open sessions on, bound by the operator: an owner token
# alone opens none (HBGW_OWNER_CHATS; tests/integration/test_tenant_chats.py).
OWNER_CHATS = ";".join(
    f"{owner}=" + ",".join(f"slack:C{n}" for n in range(5)) + ",slack:CJ"
    for owner in ("alice", "bob")
)


def api_overrides() -> dict[str, object]:
    pairs = ",".join(f"{owner}:{token}" for owner, token in TOKENS.items())
    return {
        "api_tokens": pairs,
        "admin_token": ADMIN_TOKEN,
        "api_stream_poll": 0.05,
        "owner_chats": OWNER_CHATS,
    }


@dataclass
class Api:
    url: str
    gw: Gateway

    def client(self, token: str | None) -> httpx.Client:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def owner(self, name: str) -> httpx.Client:
        return self.client(TOKENS[name])

    def admin(self) -> httpx.Client:
        return self.client(ADMIN_TOKEN)

    def public_id(self, internal: int) -> int:
        """The id the API shows for a message or run the test read from SQL."""
        shown = deployment_ids(self.gw.settings, self.gw.store.secrets).show(internal)
        assert shown is not None
        return shown

    def new_session(self, who: httpx.Client, chat: str = "C1") -> str:
        answer = who.post("/v1/sessions", json={"platform": "slack", "chat": chat, "thread": "T1"})
        assert answer.status_code == 201, answer.text
        sid: str = answer.json()["id"]
        return sid


@pytest.fixture
def api(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Api]:
    settings = gateway_settings(tmp_path, redis_url, redis_ns, **api_overrides())
    gw = Gateway(settings, redis_url)
    try:
        with serving(create_app(settings, celery_app=gw.app, redis_url=redis_url)) as url:
            yield Api(url, gw)
    finally:
        gw.close()


class EventReader:
    """Reads a server-sent event stream in a thread; the test polls ``events`` (never sleeps)."""

    def __init__(self, client: httpx.Client, path: str, headers: dict[str, str] | None = None):
        self._client = client
        self._path = path
        self._headers = headers or {}
        self.events: list[dict[str, Any]] = []
        self.comments: list[str] = []
        self.status: int | None = None
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> EventReader:
        self._thread.start()
        wait_until(lambda: self.comments or self.status not in (None, 200), 20, "the stream")
        return self

    def __exit__(self, *_exc: object) -> None:
        # Closing the response from this thread would not wake the reader blocked in recv();
        # shutting the socket down does, and the server sees the client leave at once.
        if self._response is not None:
            stream = self._response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)

    def _read(self) -> None:
        try:
            with self._client.stream("GET", self._path, headers=self._headers) as response:
                self._response = response
                self.status = response.status_code
                fields: dict[str, str] = {}
                for line in response.iter_lines():
                    fields = self._take(line, fields)
        except (httpx.HTTPError, RuntimeError, ValueError, OSError):
            return  # closed by __exit__

    def _take(self, line: str, fields: dict[str, str]) -> dict[str, str]:
        if line.startswith(":"):
            self.comments.append(line[1:].strip())
            return fields
        if line:
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
            return fields
        if fields:
            data = json.loads(fields.get("data", "null"))
            self.events.append({"id": fields.get("id"), "event": fields.get("event"), "data": data})
        return {}

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == event]
