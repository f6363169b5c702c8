"""The `telegram` fixture: a deployment with Telegram enabled (HBGW_PLATFORMS=telegram,cli), its
API under uvicorn and the fake Bot API, both on loopback; the test posts updates to the webhook
with the secret token, as Telegram does.

The API's clock runs ``BACKDATE`` behind (injected, like every clock of the domain), so a
heartbeat an update sets ``every 1m`` is due at once for the workers, which read the shared
clock: no sleeping.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from hbgw.core.clock import utcnow
from hbgw.gateway.api.app import create_app
from support.api_fixtures import api_overrides
from support.fake_telegram import BOT_ID, TOKEN, FakeTelegram, fake_telegram
from support.harness import Gateway, gateway_settings
from support.http_server import serving

SECRET = "tg-webhook-secret_5f3a9c"
GROUP = -1001234567890  # a forum supergroup
TOPIC = 42  # one of its topics
ALICE = {"id": 5550001, "is_bot": False, "first_name": "Alice"}
OWNER = f"telegram:{BOT_ID}"
BACKDATE = timedelta(seconds=61)
_message_ids = itertools.count(1000)


def api_clock() -> datetime:
    return utcnow() - BACKDATE


def message_update(
    update_id: int,
    text: str,
    *,
    chat: int = GROUP,
    topic: int | None = TOPIC,
    forum: bool = True,
    message_id: int | None = None,
    sender: dict[str, Any] = ALICE,
) -> dict[str, Any]:
    """An update as Telegram posts it: a text message in a chat, in a forum topic or not."""
    kind = "private" if chat > 0 else "supergroup"
    message: dict[str, Any] = {
        "message_id": message_id if message_id is not None else next(_message_ids),
        "from": sender,
        "chat": {"id": chat, "type": kind, "title": "ops", **({"is_forum": True} if forum else {})},
        "date": 1700000000,
        "text": text,
    }
    if topic is not None:
        message["message_thread_id"] = topic
        if forum:
            message["is_topic_message"] = True
    return {"update_id": update_id, "message": message}


def telegram_settings_values(fake: FakeTelegram) -> dict[str, object]:
    return {
        "platforms": "telegram,cli",
        "telegram_bot_token": TOKEN,
        "telegram_secret_token": SECRET,
        "telegram_api_url": fake.url,
    }


@dataclass
class Telegram:
    url: str
    fake: FakeTelegram
    gw: Gateway

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)

    def post(self, body: bytes, *, secret: str | bytes | None = SECRET) -> httpx.Response:
        headers = {b"content-type": b"application/json"}
        if secret is not None:  # bytes: a test may send what no str header could carry
            given = secret.encode() if isinstance(secret, str) else secret
            headers[b"x-telegram-bot-api-secret-token"] = given
        with self.client() as client:
            return client.post("/platforms/telegram/webhook", content=body, headers=headers)

    def update(self, update: dict[str, Any], **kw: Any) -> httpx.Response:
        return self.post(json.dumps(update).encode(), **kw)

    def session(self, chat: int = GROUP, topic: int | None = TOPIC) -> str:
        found = self.gw.store.sessions.session_at(
            platform="telegram",
            chat=str(chat),
            thread=None if topic is None else str(topic),
            now=utcnow(),
            owner=OWNER,
            create=False,
        )
        assert found is not None
        return found.id


@contextmanager
def telegram_deployment(
    tmp_path: Path, redis_url: str, redis_ns: str, **overrides: object
) -> Iterator[Telegram]:
    with fake_telegram() as fake:
        values: dict[str, object] = {
            **api_overrides(),
            **telegram_settings_values(fake),
            "api_max_body_bytes": 4096,
            **overrides,
        }
        settings = gateway_settings(tmp_path, redis_url, redis_ns, **values)
        gw = Gateway(settings, redis_url)
        app = create_app(settings, celery_app=gw.app, redis_url=redis_url, clock=api_clock)
        try:
            with serving(app) as url:
                yield Telegram(url, fake, gw)
        finally:
            gw.close()


@pytest.fixture
def telegram(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Telegram]:
    with telegram_deployment(tmp_path, redis_url, redis_ns) as deployment:
        yield deployment
