"""The `slack` fixture: a deployment with Slack enabled (HBGW_PLATFORMS=slack), its API under
uvicorn and the fake Slack Web API, both on loopback; the test posts signed requests.

The API's clock runs ``BACKDATE`` behind (injected, like every clock of the domain), so a
heartbeat that a Slack request sets ``every 1m`` is due at once for the workers, which read the
shared clock: no sleeping. Requests are signed with that same clock's time, the one the API
judges the replay window by.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from hbgw.core.clock import utcnow
from hbgw.gateway.api.app import create_app
from support.api_fixtures import api_overrides
from support.fake_slack import FakeSlack, fake_slack, slack_headers
from support.harness import Gateway, gateway_settings
from support.http_server import serving

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-17-fake-bot-token"
TEAM, CHANNEL, BOT, USER = "T0TEAM", "C0CHAN", "U0BOT", "U0ALICE"
BACKDATE = timedelta(seconds=61)


def api_clock() -> datetime:
    return utcnow() - BACKDATE


@dataclass
class Slack:
    url: str
    fake: FakeSlack
    gw: Gateway

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)

    def post(
        self,
        path: str,
        body: bytes,
        *,
        age: float = 0,
        secret: str = SECRET,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """``body`` signed as Slack would ``age`` seconds ago (by the API's clock)."""
        stamp = int(api_clock().timestamp() - age)
        signed = slack_headers(secret, body, stamp, **(headers or {}))
        with self.client() as client:
            return client.post(path, content=body, headers=signed)

    def command(self, text: str, *, channel: str = CHANNEL, **kw: Any) -> httpx.Response:
        form = {
            "team_id": TEAM,
            "channel_id": channel,
            "user_id": USER,
            "command": "/hbgw",
            "text": text,
            "response_url": "https://hooks.slack.invalid/commands/1",
        }
        body = urlencode(form).encode()
        form_type = {"Content-Type": "application/x-www-form-urlencoded"}
        return self.post("/platforms/slack/commands", body, headers=form_type, **kw)

    def event(
        self, event_id: str, event: dict[str, Any], *, team: str = TEAM, **kw: Any
    ) -> httpx.Response:
        return self.post("/platforms/slack/events", event_body(event_id, event, team=team), **kw)


def event_body(event_id: str, event: dict[str, Any], *, team: str = TEAM) -> bytes:
    payload = {
        "type": "event_callback",
        "team_id": team,
        "api_app_id": "A0APP",
        "event_id": event_id,
        "event_time": 1700000000,
        "authorizations": [{"team_id": team, "user_id": BOT, "is_bot": True}],
        "event": event,
    }
    return json.dumps(payload).encode()


def message(text: str, ts: str, *, thread_ts: str | None = None, **extra: Any) -> dict[str, Any]:
    event = {
        "type": "message",
        "channel": CHANNEL,
        "channel_type": "channel",
        "user": USER,
        "text": text,
        "ts": ts,
        **extra,
    }
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return event


@contextmanager
def slack_deployment(
    tmp_path: Path, redis_url: str, redis_ns: str, **overrides: object
) -> Iterator[Slack]:
    with fake_slack() as fake:
        values: dict[str, object] = {
            **api_overrides(),
            "platforms": "slack,cli",
            "slack_signing_secret": SECRET,
            "slack_bot_token": BOT_TOKEN,
            "slack_api_url": fake.api_url,
            "api_max_body_bytes": 4096,
            **overrides,
        }
        settings = gateway_settings(tmp_path, redis_url, redis_ns, **values)
        gw = Gateway(settings, redis_url)
        app = create_app(settings, celery_app=gw.app, redis_url=redis_url, clock=api_clock)
        try:
            with serving(app) as url:
                yield Slack(url, fake, gw)
        finally:
            gw.close()


@pytest.fixture
def slack(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Slack]:
    with slack_deployment(tmp_path, redis_url, redis_ns) as deployment:
        yield deployment
