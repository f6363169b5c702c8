"""Replays and retries of signed inbound requests are taken once, and only theirs (issue 29,
low): the same signed Slack slash command replayed within the replay window made a cron job
each time; a signed webhook's sender id was de-duplicated across owners and chats, so one
owner's message id dropped another's message. Real Redis and SQL, the API under uvicorn."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from support.fake_slack import slack_headers
from support.slack_fixtures import CHANNEL, SECRET, TEAM, USER, Slack, api_clock, slack_deployment
from support.webhook_fixtures import Webhook, webhook_deployment

from hbgw.gateway.platforms.slack.routes import TAKEN_BEFORE


@pytest.fixture
def slack(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Slack]:
    with slack_deployment(tmp_path, redis_url, redis_ns) as deployment:
        yield deployment


@pytest.fixture
def webhook(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Webhook]:
    with webhook_deployment(tmp_path, redis_url, redis_ns) as deployment:
        yield deployment


def _slash(text: str, trigger: str) -> bytes:
    form = {
        "team_id": TEAM,
        "channel_id": CHANNEL,
        "user_id": USER,
        "command": "/hbgw",
        "text": text,
        "trigger_id": trigger,
        "response_url": "https://hooks.slack.invalid/commands/1",
    }
    return urlencode(form).encode()


def test_a_replayed_slash_command_is_applied_once(slack: Slack) -> None:
    body = _slash("cron add every 2h -- report", "13345224609.738474920.8088930838d88f")
    stamp = int(api_clock().timestamp())
    headers = slack_headers(
        SECRET, body, stamp, **{"Content-Type": "application/x-www-form-urlencoded"}
    )
    with slack.client() as client:
        answers = [
            client.post("/platforms/slack/commands", content=body, headers=headers)
            for _ in range(3)
        ]
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert answers[0].json()["text"].startswith("⏰ Cron job")
        assert [a.json()["text"] for a in answers[1:]] == [TAKEN_BEFORE, TAKEN_BEFORE]
        assert len(slack.gw.store.jobs.jobs()) == 1
        # Another command (Slack gives each its own trigger_id) is taken, the same text too.
        other = _slash("cron add every 2h -- report", "13345224609.738474920.other")
        signed = slack_headers(
            SECRET, other, stamp, **{"Content-Type": "application/x-www-form-urlencoded"}
        )
        again = client.post("/platforms/slack/commands", content=other, headers=signed)
    assert again.json()["text"].startswith("⏰ Cron job")
    assert len(slack.gw.store.jobs.jobs()) == 2


def _message(hook: Webhook, sender_id: str, owner: str, chat: str) -> httpx.Response:
    payload = {"id": sender_id, "chat": chat, "text": f"hello from {owner}", "owner": owner}
    return hook.post(json.dumps(payload).encode())


def test_a_webhook_senders_id_is_its_own_within_an_owner_and_chat(webhook: Webhook) -> None:
    first = _message(webhook, "1", "alice", "room-1")
    assert first.status_code == 202
    assert _message(webhook, "1", "alice", "room-1").json()["duplicate"] is True  # a retry
    for owner, chat in (("bob", "room-1"), ("alice", "room-2")):
        taken = _message(webhook, "1", owner, chat)
        assert taken.status_code == 202, taken.text
        assert taken.json()["duplicate"] is False
    stored = [
        (s.owner, s.chat, [m.text for m in webhook.gw.store.messages.list_messages(s.id)])
        for s in webhook.gw.store.sessions.list_sessions()
    ]
    assert sorted(stored) == [
        ("alice", "room-1", ["hello from alice"]),
        ("alice", "room-2", ["hello from alice"]),
        ("bob", "room-1", ["hello from bob"]),
    ]
