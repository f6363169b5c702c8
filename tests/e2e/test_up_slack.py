"""Issue 17's acceptance, as a new user tries it: `hbgw up` (a real process, embedded Redis and
SQLite) with the Slack settings pointed at the fake Slack Web API; a signed `/hbgw heartbeat`
slash command and a thread message that mentions the app; the heartbeats arrive — the
channel's in the channel, the thread's in the thread — posted by `hbgw up`'s own workers."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from support.fake_slack import FakeSlack, fake_slack, slack_headers
from support.harness import wait_until
from support.up_process import hbgw_up

pytestmark = pytest.mark.timeout(240)

SECRET = "4c7f1d2e9a8b3c6d5e4f3a2b1c0d9e8f"
TOKEN = "xoxb-42-up-test-token"
TEAM, CHANNEL, BOT, ROOT = "T0UP", "C0UP", "U0UPBOT", "1700000100.000100"
EVERY = 3  # seconds (HBGW_MIN_INTERVAL=1): the path a `every 1m` takes, without the minute


def signed_post(api: str, path: str, body: bytes, content_type: str) -> httpx.Response:
    headers = slack_headers(SECRET, body, int(time.time()), **{"Content-Type": content_type})
    return httpx.post(f"{api}{path}", content=body, headers=headers, timeout=30)


def slash(api: str, text: str) -> httpx.Response:
    form = {
        "team_id": TEAM, "channel_id": CHANNEL, "user_id": "U0ALICE", "command": "/hbgw",
        "text": text, "response_url": "https://hooks.slack.invalid/commands/1",
    }  # fmt: skip
    body = urlencode(form).encode()
    return signed_post(api, "/platforms/slack/commands", body, "application/x-www-form-urlencoded")


def thread_mention(api: str, text: str) -> httpx.Response:
    event = {
        "type": "message", "channel": CHANNEL, "channel_type": "channel", "user": "U0ALICE",
        "text": f"<@{BOT}> {text}", "ts": "1700000100.000200", "thread_ts": ROOT,
    }  # fmt: skip
    payload = {
        "type": "event_callback", "team_id": TEAM, "api_app_id": "A0UP", "event_id": "EvUp1",
        "event_time": 1700000100, "event": event,
        "authorizations": [{"team_id": TEAM, "user_id": BOT, "is_bot": True}],
    }  # fmt: skip
    return signed_post(
        api, "/platforms/slack/events", json.dumps(payload).encode(), "application/json"
    )


def heartbeats(fake: FakeSlack, thread: str | None) -> list[str]:
    return [
        str(c.params["text"])
        for c in fake.posts(channel=CHANNEL)
        if c.params.get("thread_ts") == thread and not str(c.params["text"]).startswith("♥")
    ]


def test_hbgw_up_with_slack_delivers_heartbeats_into_the_thread(tmp_path: Path) -> None:
    with fake_slack() as fake:
        settings = {
            "HBGW_PLATFORMS": "slack,cli",
            "HBGW_SLACK_SIGNING_SECRET": SECRET,
            "HBGW_SLACK_BOT_TOKEN": TOKEN,
            "HBGW_SLACK_API_URL": fake.api_url,
            "HBGW_MIN_INTERVAL": "1",
            "HBGW_AGENT": "echo",
        }
        home = tmp_path / "home"
        home.mkdir()
        with hbgw_up(home, **settings) as api_file:
            api = str(api_file["url"]).rstrip("/")
            answer = slash(api, f"heartbeat every {EVERY}s check the deploy")
            assert answer.status_code == 200, answer.text
            assert answer.json()["text"].startswith("♥ Heartbeat set"), answer.text
            assert thread_mention(api, f"heartbeat every {EVERY}s summarize the thread").json() == {
                "ok": True
            }
            wait_until(lambda: heartbeats(fake, ROOT), 90, "a heartbeat posted into the thread")
            wait_until(lambda: heartbeats(fake, None), 90, "a heartbeat posted into the channel")
    # The echo agent answers a heartbeat turn with the first line of what it was given.
    assert heartbeats(fake, ROOT)[0].startswith("echo: [Heartbeat")
    assert heartbeats(fake, None)[0].startswith("echo: [Heartbeat")
    assert {c.token for c in fake.calls} == {TOKEN}
    assert not any("reply_broadcast" in c.params for c in fake.calls)
