"""The `discord` fixture: a deployment with Discord enabled (HBGW_PLATFORMS=discord,cli), its
API under uvicorn and the fake Discord REST API, both on loopback; the test posts interactions
signed with an Ed25519 key it made (its public key is HBGW_DISCORD_PUBLIC_KEY).

The API's clock runs ``BACKDATE`` behind (injected, like every clock of the domain), so a
heartbeat that an interaction sets ``every 1m`` is due at once for the workers, which read the
shared clock: no sleeping. Interactions are signed with that same clock's time, the one the API
judges the replay window by.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from nacl.signing import SigningKey

from hbgw.core.clock import utcnow
from hbgw.gateway.api.app import create_app
from support.api_fixtures import api_overrides
from support.fake_discord import FakeDiscord, fake_discord
from support.harness import Gateway, gateway_settings
from support.http_server import serving

BOT_TOKEN = "MTA5.fake-discord.bot-token"
APP_ID, GUILD, CHANNEL, THREAD, USER = "1001", "2002", "3003", "4004", "5005"
BACKDATE = timedelta(seconds=61)
KEY = SigningKey.generate()
PUBLIC_KEY = KEY.verify_key.encode().hex()
_IDS = itertools.count(9000000000000000001)


def api_clock() -> datetime:
    return utcnow() - BACKDATE


def signed_headers(key: SigningKey, body: bytes, timestamp: int) -> dict[str, str]:
    """The headers Discord signs an interaction with: Ed25519 over ``timestamp + body``."""
    signature = key.sign(str(timestamp).encode() + body).signature.hex()
    return {
        "X-Signature-Ed25519": signature,
        "X-Signature-Timestamp": str(timestamp),
        "Content-Type": "application/json",
    }


def interaction(
    name: str,
    text: str | None = None,
    *,
    thread: bool = False,
    guild: str | None = GUILD,
    iid: str | None = None,
    **data: Any,
) -> dict[str, Any]:
    """An application command as Discord sends it, in ``CHANNEL`` or its thread ``THREAD``."""
    channel = (
        {"id": THREAD, "type": 11, "parent_id": CHANNEL} if thread else {"id": CHANNEL, "type": 0}
    )
    options = [] if text is None else [{"name": "text", "type": 3, "value": text}]
    payload: dict[str, Any] = {
        "id": iid or str(next(_IDS)),
        "application_id": APP_ID,
        "type": 2,
        "token": f"aW50ZXJhY3Rpb24.{next(_IDS)}",
        "version": 1,
        "channel_id": channel["id"],
        "channel": channel,
        "data": {"id": "7007", "name": name, "type": 1, "options": options, **data},
    }
    if guild is not None:
        payload["guild_id"] = guild
        payload["member"] = {"user": {"id": USER, "username": "alice"}}
    else:
        payload["user"] = {"id": USER, "username": "alice"}
    return payload


@dataclass
class Discord:
    url: str
    fake: FakeDiscord
    gw: Gateway
    key: SigningKey = field(default=KEY)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)

    def post(self, body: bytes, *, age: float = 0, key: SigningKey | None = None) -> httpx.Response:
        """``body`` signed as Discord would ``age`` seconds ago (by the API's clock)."""
        stamp = int(api_clock().timestamp() - age)
        headers = signed_headers(key or self.key, body, stamp)
        with self.client() as client:
            return client.post("/platforms/discord/interactions", content=body, headers=headers)

    def send(self, payload: dict[str, Any], **kw: Any) -> httpx.Response:
        return self.post(json.dumps(payload).encode(), **kw)

    def session(self, *, thread: bool) -> str:
        found = self.gw.store.sessions.session_at(
            platform="discord",
            chat=CHANNEL,
            thread=THREAD if thread else None,
            now=utcnow(),
            owner=f"discord:{GUILD}",
            create=False,
        )
        assert found is not None
        return found.id


def discord_settings(fake: FakeDiscord) -> dict[str, object]:
    return {
        "discord_public_key": PUBLIC_KEY,
        "discord_bot_token": BOT_TOKEN,
        "discord_application_id": APP_ID,
        "discord_api_url": fake.api_url,
    }


@contextmanager
def discord_deployment(
    tmp_path: Path, redis_url: str, redis_ns: str, **overrides: object
) -> Iterator[Discord]:
    with fake_discord() as fake:
        values: dict[str, object] = {
            **api_overrides(),
            "platforms": "discord,cli",
            **discord_settings(fake),
            "api_max_body_bytes": 4096,
            **overrides,
        }
        settings = gateway_settings(tmp_path, redis_url, redis_ns, **values)
        gw = Gateway(settings, redis_url)
        app = create_app(settings, celery_app=gw.app, redis_url=redis_url, clock=api_clock)
        try:
            with serving(app) as url:
                yield Discord(url, fake, gw)
        finally:
            gw.close()


@pytest.fixture
def discord(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Discord]:
    with discord_deployment(tmp_path, redis_url, redis_ns) as deployment:
        yield deployment
