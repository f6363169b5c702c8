"""With the database away, an owner's request answers a bare 503 with a reference; the host, the
port, the role and the server's words go only to the log, under that reference.

Pins issue 29 (low): ``POST /v1/sessions`` with PostgreSQL unreachable answered 503 with the
store error's sentence, which named the database's host, port and role."""

from __future__ import annotations

import logging
import re
import socket
from pathlib import Path

import pytest
from support.api_fixtures import ALICE, Api, api_overrides
from support.harness import gateway_settings
from support.http_server import serving

from hbgw.gateway.api.app import create_app

ROLE = "hbgw_ghost_role"
STORE_AWAY = "The store is unavailable; try again shortly."
REFERENCE = re.compile(r"^[0-9a-f]{12}$")


def _closed_port() -> int:
    """A loopback port nothing listens on: bound, read, released."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("away", ["closed port", "unknown role"])
def test_an_unreachable_database_answers_503_without_its_host_port_or_role(
    away: str, tmp_path: Path, redis_url: str, redis_ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A closed port: nothing answers. The shared server with a role it does not know: it
    # answers, and its refusal names the role (`role "…" does not exist`).
    port = _closed_port() if away == "closed port" else 5432
    database = f"postgresql+psycopg://{ROLE}@127.0.0.1:{port}/hbgw_nowhere"
    settings = gateway_settings(
        tmp_path, redis_url, redis_ns, database_url=database, **api_overrides()
    )
    app = create_app(settings, redis_url=redis_url)
    with serving(app) as url, caplog.at_level(logging.WARNING, "hbgw.api"):
        api = Api(url, None)  # type: ignore[arg-type]  # no deployment behind: no workers
        with api.owner(ALICE) as alice, api.admin() as admin:
            answer = alice.post("/v1/sessions", json={"platform": "cli", "chat": "me"})
            # Every route answers through the same handler: a read, and the admin's too.
            others = [alice.get("/v1/sessions"), admin.get("/v1/sessions/s0/messages")]
    assert answer.status_code == 503, answer.text
    for detail in ("127.0.0.1", str(port), ROLE, "hbgw_nowhere", "psycopg"):
        assert detail not in answer.text
    error = answer.json()["error"]
    reference = error["reference"]
    assert error["code"] == "unavailable" and REFERENCE.match(reference)
    assert error["message"] == f"{STORE_AWAY} Reference: {reference}."
    # The operator finds the detail by the reference the owner quotes.
    [logged] = [r for r in caplog.records if getattr(r, "reference", None) == reference]
    line = logged.getMessage()
    assert reference in line and "127.0.0.1" in line and str(port) in line
    if away == "unknown role":
        assert ROLE in line
    for other in others:
        assert other.status_code == 503 and other.json()["error"]["message"].startswith(STORE_AWAY)
        assert all(detail not in other.text for detail in ("127.0.0.1", str(port), ROLE))
