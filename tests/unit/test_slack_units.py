"""Slack's pure parts: which messages are taken and as which session, commands said to the app,
reply splitting, and how a Slack refusal is typed (permanent or transient)."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

from hbgw.core.errors import PermanentDelivery, TransientDelivery
from hbgw.gateway.platforms.slack.channel import SPLIT_AT, classify
from hbgw.gateway.platforms.slack.events import as_command, read_message, session_thread
from hbgw.gateway.platforms.split import split_text


def payload(**event: Any) -> dict[str, Any]:
    base = {"type": "message", "channel": "C1", "channel_type": "channel", "user": "U1"}
    return {
        "team_id": "T1",
        "authorizations": [{"user_id": "UBOT", "is_bot": True}],
        "event": {**base, "text": "hi", "ts": "10.1", **event},
    }


@pytest.mark.parametrize(
    ("event", "thread", "may_start"),
    [
        ({"text": "<@UBOT> hi"}, "10.1", True),  # a mention starts a thread under it
        ({}, "10.1", False),  # a channel's chatter: only an existing session takes it
        ({"thread_ts": "9.0"}, "9.0", False),  # a reply: the thread, if it is a session
        ({"thread_ts": "9.0", "text": "<@UBOT> yes"}, "9.0", True),
        ({"channel_type": "im"}, None, True),  # a DM is one conversation
        ({"channel_type": "im", "thread_ts": "9.0"}, "9.0", True),
    ],
)
def test_sessions_of_messages(event: dict[str, Any], thread: str | None, may_start: bool) -> None:
    message = read_message(payload(**event))
    assert message is not None
    assert session_thread(message) == (thread, may_start)
    assert message.owner == "slack:T1" and message.idempotency_key == "slack:10.1"


@pytest.mark.parametrize(
    "event",
    [
        {"bot_id": "B1"},  # a bot's post, ours included
        {"user": "UBOT"},  # our own user
        {"subtype": "message_changed"},
        {"subtype": "channel_join"},
        {"type": "reaction_added"},
        {"text": ""},
        {"channel_type": "app_home"},
    ],
)
def test_ignored_events(event: dict[str, Any]) -> None:
    assert read_message(payload(**event)) is None


def test_text_is_unescaped_and_the_mention_removed() -> None:
    message = read_message(payload(text="<@UBOT> heartbeat every 1m a &lt;b&gt; &amp; c"))
    assert message is not None and message.mentions_app
    assert message.text == "heartbeat every 1m a <b> & c"
    assert as_command(message.text, addressed=True) == "/heartbeat every 1m a <b> & c"
    assert as_command("heartbeat is fine", addressed=False) == "heartbeat is fine"
    assert as_command("  /hb status", addressed=False) == "/hb status"
    typed = read_message(payload(text="&lt;@UBOT&gt; hi"))  # typed, not a mention
    assert typed is not None and not typed.mentions_app


def test_long_replies_split_at_breaks_and_join_back() -> None:
    paragraphs = "\n\n".join(f"paragraph {i} " + "word " * 150 for i in range(12))
    parts = split_text(paragraphs, SPLIT_AT)
    assert len(parts) > 1 and all(0 < len(p) <= SPLIT_AT for p in parts)
    assert "\n\n".join(parts) == paragraphs  # cut at paragraph breaks only
    lines = "\n".join("line " * 30 for _ in range(100))
    assert "\n".join(split_text(lines, 1000)) == lines
    assert split_text("x" * 2500, 1000) == ["x" * 1000, "x" * 1000, "x" * 500]
    assert split_text("short", 1000) == ["short"]
    assert split_text("ends on a break\n\n", 15) == ["ends on a break"]


def refusal(status: int, error: str) -> SlackApiError:
    response = SlackResponse(
        client=None,
        http_verb="POST",
        api_url="https://slack.invalid/api/chat.postMessage",
        req_args={},
        data={"ok": False, "error": error},
        headers={},
        status_code=status,
    )
    return SlackApiError("refused", response)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize(
    ("status", "error", "kind"),
    [
        (200, "not_in_channel", PermanentDelivery),
        (200, "channel_not_found", PermanentDelivery),
        (200, "is_archived", PermanentDelivery),
        (200, "invalid_auth", PermanentDelivery),
        (403, "", PermanentDelivery),
        (404, "", PermanentDelivery),
        (429, "ratelimited", TransientDelivery),
        (500, "fatal_error", TransientDelivery),
        (503, "service_unavailable", TransientDelivery),
        (200, "something_new", TransientDelivery),
    ],
)
def test_refusals_are_typed(status: int, error: str, kind: type[Exception]) -> None:
    failure = classify(refusal(status, error))
    assert type(failure) is kind
    assert failure.platform == "slack" and failure.reason == (error or f"http_{status}")
    assert str(failure).endswith(".")
