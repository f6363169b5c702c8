"""The `webhook` fixture: a deployment with signed webhooks enabled (HBGW_PLATFORMS=webhook,cli),
its API under uvicorn and a receiver (``fake_webhook_receiver.py``), both on loopback; the test
posts signed messages and reads what the receiver got.

The API's clock runs ``BACKDATE`` behind, so a heartbeat set ``every 1m`` by a message is due at
once for the workers (they read the shared clock): no sleeping. Messages are signed with the
API's clock, the one it judges the replay window by.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from hbgw.core.clock import utcnow
from hbgw.core.outbound import OutboundGuard, parse_allowlist
from hbgw.gateway.api.app import create_app
from hbgw.gateway.platforms.webhook.signature import signed_headers
from hbgw.sessions.models import DeliveryRow
from support.api_fixtures import ADMIN_TOKEN, api_overrides
from support.fake_webhook_receiver import FakeReceiver, fake_receiver
from support.harness import Gateway, gateway_settings
from support.http_server import serving

SECRET = "whsec-5f0c1d2e3a4b5c6d7e8f"
BACKDATE = timedelta(seconds=61)
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
TIMEOUT = 1.0  # seconds an outbound POST may take: a hang of 2 s is past it
# The session lock's lease here, seconds. The harness's 2 s (``FAST``) is for tests that wait
# for a dead worker's lock to expire; none does here. API, receiver, worker and the lock renewals
# all run in this one test process: with 2 s, a pause of the whole process (the GIL held by a
# full garbage collection, a starved VM) of ~1.4 s, two renewal periods, let the lock lapse in
# Redis. The turn then stopped "Lost the lock", as it should, and a test of the sender's retries
# failed on what it does not test.
LOCK_LEASE = 15.0
# The receivers of these tests listen on loopback, which outbound webhooks refuse unless the
# operator allows it (issue 29): the deployments here allow it, as an operator would for a
# receiver of their own. A test of the refusal builds its deployment with ``NOTHING_INSIDE``.
LOOPBACK_ALLOWED = "127.0.0.1/32"
NOTHING_INSIDE = ""


def loopback_guard() -> OutboundGuard:
    """The outbound rule with loopback's 127.0.0.1 allowed, for a channel built in a test."""
    return OutboundGuard(parse_allowlist(LOOPBACK_ALLOWED))


def api_clock() -> datetime:
    return utcnow() - BACKDATE


@dataclass
class Webhook:
    url: str
    receiver: FakeReceiver
    gw: Gateway

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)

    def post(
        self, body: bytes, *, age: float = 0, secret: str = SECRET, sign: bool = True
    ) -> httpx.Response:
        """``body`` signed ``age`` seconds ago (by the API's clock), as another gateway would."""
        stamp = int(api_clock().timestamp() - age)
        headers = signed_headers(secret, stamp, body) if sign else {}
        with self.client() as client:
            return client.post("/platforms/webhook/messages", content=body, headers=headers)

    def message(self, sender_id: str, text: str, **fields: Any) -> httpx.Response:
        payload = {"id": sender_id, "chat": "room-1", "thread": "t-1", "text": text, **fields}
        return self.post(json.dumps(payload).encode())

    def route(self, session_id: str, url: str | None) -> httpx.Response:
        with self.client() as client:
            return client.put(
                f"/v1/sessions/{session_id}/webhook", json={"url": url}, headers=ADMIN
            )

    def deliveries(self) -> list[DeliveryRow]:
        with Session(self.gw.store.engine) as db:
            return list(db.scalars(select(DeliveryRow).order_by(DeliveryRow.id)))


@contextmanager
def webhook_deployment(
    tmp_path: Path, redis_url: str, redis_ns: str, **overrides: object
) -> Iterator[Webhook]:
    with fake_receiver() as receiver:
        values: dict[str, object] = {
            **api_overrides(),
            "platforms": "webhook,cli",
            "webhook_secret": SECRET,
            "webhook_timeout": TIMEOUT,
            "webhook_retries": 3,
            "webhook_retry_seconds": 15,
            "lock_lease": LOCK_LEASE,
            "api_max_body_bytes": 4096,
            "webhook_allow_networks": LOOPBACK_ALLOWED,
            **overrides,
        }
        settings = gateway_settings(tmp_path, redis_url, redis_ns, **values)
        gw = Gateway(settings, redis_url)
        app = create_app(settings, celery_app=gw.app, redis_url=redis_url, clock=api_clock)
        try:
            with serving(app) as url:
                yield Webhook(url, receiver, gw)
        finally:
            gw.close()


@pytest.fixture
def webhook(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Webhook]:
    with webhook_deployment(tmp_path, redis_url, redis_ns) as deployment:
        yield deployment
