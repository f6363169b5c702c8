"""Slack's inbound messages are held to the HTTP API's limits (issue 17, Slack leftovers): the
per-session message rate (HBGW_API_MESSAGES_PER_MINUTE) and the per-owner heartbeat quota
(HBGW_API_MAX_HEARTBEATS_PER_OWNER; a workspace is one owner), answered in Slack with the
API's sentence, nothing stored. Real Redis and SQL, the API under uvicorn, the fake Slack."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.harness import wait_until
from support.slack_fixtures import BOT, CHANNEL, Slack, message, slack_deployment

from hbgw.core.clock import utcnow


@pytest.fixture
def limited(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Slack]:
    limits = {"api_messages_per_minute": 2, "api_max_heartbeats_per_owner": 1}
    with slack_deployment(tmp_path, redis_url, redis_ns, **limits) as deployment:
        yield deployment


def test_the_message_rate_binds_slack_messages(limited: Slack) -> None:
    thread = "1700000000.000700"
    for n in range(3):
        said = message(f"<@{BOT}> question {n}", f"1700000000.00070{n}", thread_ts=thread)
        assert limited.event(f"EvR{n}", said).status_code == 200
    refusal = wait_until(lambda: limited.fake.posts(thread_ts=thread), 30, "the refusal")
    assert refusal[0].params["text"].startswith("This session takes at most 2 messages a minute")
    [session] = [s for s in limited.gw.store.sessions.list_sessions() if s.thread == thread]
    texts = [m.text for m in limited.gw.store.messages.list_messages(session.id, limit=10)]
    assert texts == ["question 0", "question 1"]  # the third was not stored


def test_the_heartbeat_quota_binds_slack_commands(limited: Slack) -> None:
    first = limited.command("heartbeat every 1m check the deploy")
    assert first.json()["text"].startswith("♥ Heartbeat set")
    again = limited.command("heartbeat every 5m and again")  # the same session: a replacement
    assert again.json()["text"].startswith("♥ Heartbeat set")
    other = limited.command("heartbeat every 1m elsewhere", channel="C0OTHER")
    sentence = other.json()["text"]
    assert sentence.startswith("This owner already has 1 heartbeats, the most allowed")
    assert "HBGW_API_MAX_HEARTBEATS_PER_OWNER" in sentence
    sessions = {s.chat: s.id for s in limited.gw.store.sessions.list_sessions()}
    assert (
        limited.gw.store.heartbeats.heartbeat_status(sessions["C0OTHER"], utcnow()).status == "none"
    )
    assert CHANNEL in sessions
