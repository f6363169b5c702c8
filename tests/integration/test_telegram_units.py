"""Telegram's pure parts — which updates are taken and as which session, commands with their
``@botname``, how a refusal is typed — and its channel against the fake Bot API: long text in
parts of 4,096, 429s waited out within bounds (the sleep injected), typed failures; and its
settings: secrets, masked, together or not at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from support.fake_telegram import BLOCKED, CHAT_NOT_FOUND, TOKEN, Failure, FakeTelegram
from support.fake_telegram import fake_telegram as serve_fake
from support.telegram_fixtures import message_update

from hbgw.core.errors import BadInput, PermanentDelivery, TransientDelivery
from hbgw.core.logs import configured_secrets
from hbgw.core.settings import Settings
from hbgw.gateway.channels import make_channel
from hbgw.gateway.channels.file import FileChannel
from hbgw.gateway.platforms.served import Served
from hbgw.gateway.platforms.telegram.api import Refused
from hbgw.gateway.platforms.telegram.channel import (
    SPLIT_AT,
    TelegramChannel,
    classify,
    telegram_parts,
)
from hbgw.gateway.platforms.telegram.updates import as_text, read_command, read_update
from hbgw.procs import ROLE_SECRETS
from hbgw.workers.ports import Address

TELEGRAM = {"telegram_bot_token": TOKEN, "telegram_secret_token": "s3cret-token_1"}
TOPIC = Address("telegram", "-1001", "42")


@pytest.mark.parametrize(
    ("kw", "chat", "thread"),
    [
        ({}, "-1001234567890", "42"),  # a forum topic is a session of its own
        ({"topic": None}, "-1001234567890", None),  # the forum's General topic: the chat
        ({"forum": False, "topic": 77}, "-1001234567890", None),  # a reply thread: the chat
        ({"chat": 5550001, "topic": None}, "5550001", None),  # a private chat
    ],
)
def test_sessions_of_messages(kw: dict[str, Any], chat: str, thread: str | None) -> None:
    message = read_update(message_update(9, "hi", message_id=31, **kw))
    assert message is not None
    assert (message.chat, message.thread) == (chat, thread)
    assert message.idempotency_key == "telegram:31" and message.update_id == 9


@pytest.mark.parametrize(
    "change",
    [
        {"from": {"id": 1, "is_bot": True, "first_name": "b"}},
        {"from": None},  # an anonymous group admin or a channel speaking
        {"text": ""},
        {"text": None},
        {"chat": {"id": -100, "type": "channel"}},
    ],
)
def test_ignored_messages(change: dict[str, Any]) -> None:
    update = message_update(1, "hello")
    update["message"].update(change)
    assert read_update(update) is None
    assert read_update({"update_id": 2, "edited_message": update["message"]}) is None


@pytest.mark.parametrize(
    ("text", "passed"),
    [
        ("/heartbeat@hbgw_test_bot every 15m check", "/heartbeat every 15m check"),
        ("/HB@hbgw_test_bot status", "/hb status"),
        ("/hb", "/hb"),
        ("/heartbeat every 1m x", "/heartbeat every 1m x"),
        ("/start", "/start"),
        ("hello /heartbeat", "hello /heartbeat"),
        ("/heartbeats are nice", "/heartbeats are nice"),  # another command: text for the agent
    ],
)
def test_commands_lose_their_bot_suffix(text: str, passed: str) -> None:
    assert as_text(read_command(text), text) == passed


def test_the_suffix_names_the_bot() -> None:
    command = read_command("/heartbeat@Other_Bot every 1m x")
    assert command is not None and command.bot == "Other_Bot" and command.name == "heartbeat"
    assert read_command("no command") is None


@pytest.mark.parametrize(
    ("status", "description", "kind", "reason"),
    [
        (403, "Forbidden: bot was blocked by the user", PermanentDelivery, "bot_blocked"),
        (
            403,
            "Forbidden: bot was kicked from the supergroup chat",
            PermanentDelivery,
            "bot_kicked",
        ),
        (403, "Forbidden: bot is not a member of the group chat", PermanentDelivery, "not_member"),
        (400, "Bad Request: chat not found", PermanentDelivery, "chat_not_found"),
        (400, "Bad Request: message thread not found", PermanentDelivery, "thread_not_found"),
        (400, "Bad Request: TOPIC_CLOSED", PermanentDelivery, "topic_closed"),
        (401, "Unauthorized", PermanentDelivery, "unauthorized"),
        (404, "Not Found", PermanentDelivery, "not_found"),
        (429, "Too Many Requests: retry after 60", TransientDelivery, "ratelimited"),
        (500, "Internal Server Error", TransientDelivery, "http_500"),
        (502, "Bad Gateway", TransientDelivery, "http_502"),
        (400, "Bad Request: message text is empty", TransientDelivery, "http_400"),
    ],
)
def test_refusals_are_typed(status: int, description: str, kind: type, reason: str) -> None:
    failure = classify(Refused("sendMessage", status, description))
    assert type(failure) is kind
    assert failure.platform == "telegram" and failure.reason == reason
    assert description in str(failure) and str(failure).endswith(".")


def test_a_migrated_group_names_its_new_id() -> None:
    refused = Refused(
        "sendMessage", 400, "Bad Request: group chat was upgraded to a supergroup chat", None, -1009
    )
    failure = classify(refused)
    assert failure.reason == "chat_migrated" and "its new id is -1009" in str(failure)


def test_parts_fit_telegram_in_characters_and_utf16_units() -> None:
    paragraphs = "\n\n".join(f"paragraph {i} " + "word " * 300 for i in range(10))
    parts = telegram_parts(paragraphs)
    assert len(parts) > 1 and all(len(p) <= SPLIT_AT for p in parts)
    assert "\n\n".join(parts) == paragraphs
    emoji = "🙂" * 3000  # 6,000 UTF-16 units in 3,000 characters
    parts = telegram_parts(emoji)
    assert "".join(parts) == emoji
    assert all(len(p.encode("utf-16-le")) // 2 <= SPLIT_AT for p in parts)


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with serve_fake() as served:
        yield served


def channel(fake: FakeTelegram, slept: list[float]) -> TelegramChannel:
    return TelegramChannel(TOKEN, base_url=fake.url, timeout=5, sleep=slept.append)


def send(ch: TelegramChannel, text: str, address: Address = TOPIC) -> str | None:
    receipt = ch.send(address, text, session_id="s1", kind="reply", delivery_key="k1")
    return receipt.message_id


def test_long_text_goes_out_in_order_into_the_same_topic(fake: FakeTelegram) -> None:
    text = "\n".join(f"line {i:05d} " + "x" * 90 for i in range(100))  # ~10,000 characters
    first = send(channel(fake, []), text)
    sends = fake.sends()
    assert len(sends) == 3 and all(len(c.params["text"]) <= 4096 for c in sends)
    assert "\n".join(c.params["text"] for c in sends) == text
    assert {(c.params["chat_id"], c.params["message_thread_id"]) for c in sends} == {("-1001", 42)}
    assert first == "100"  # the receipt names the first part
    plain = Address("telegram", "5550001")
    send(channel(fake, []), "hi", plain)
    assert "message_thread_id" not in fake.sends(text="hi")[0].params


def test_429s_are_waited_out_within_bounds(fake: FakeTelegram) -> None:
    slept: list[float] = []
    fake.fail_next("sendMessage", Failure(429, retry_after=7), Failure(429, retry_after=3))
    assert send(channel(fake, slept), "after the waits") is not None
    assert slept == [7.0, 3.0]
    slept.clear()
    fake.fail_next("sendMessage", Failure(429, retry_after=120))  # longer than a turn may wait
    with pytest.raises(TransientDelivery) as too_long:
        send(channel(fake, slept), "no")
    assert too_long.value.reason == "ratelimited" and slept == []
    fake.fail_next("sendMessage", *[Failure(429, retry_after=1)] * 4)
    with pytest.raises(TransientDelivery):
        send(channel(fake, slept), "no")
    assert slept == [1.0, 1.0, 1.0]  # three retries, then it gives up


def test_failures_are_typed_and_typing_waits_for_nothing(fake: FakeTelegram) -> None:
    slept: list[float] = []
    ch = channel(fake, slept)
    fake.fail_next("sendMessage", BLOCKED, CHAT_NOT_FOUND, Failure(503))
    with pytest.raises(PermanentDelivery, match="blocked by the user"):
        send(ch, "a")
    with pytest.raises(PermanentDelivery) as gone:
        send(ch, "b")
    assert gone.value.reason == "chat_not_found"
    with pytest.raises(TransientDelivery):
        send(ch, "c")
    fake.fail_next("sendChatAction", Failure(429, retry_after=2))
    with pytest.raises(TransientDelivery):
        ch.typing(TOPIC, session_id="s1")
    assert slept == []
    dead = TelegramChannel(TOKEN, base_url="http://127.0.0.1:9", timeout=2)
    with pytest.raises(TransientDelivery) as unreachable:
        send(dead, "d")
    assert unreachable.value.reason == "unreachable" and TOKEN not in str(unreachable.value)


def test_settings_are_secrets_and_come_together(tmp_path: Path) -> None:
    configured = Settings(home=tmp_path, channel="file", **TELEGRAM)  # type: ignore[arg-type]
    shown = configured.masked()
    assert shown["telegram_bot_token"] == shown["telegram_secret_token"] == "********"
    assert set(TELEGRAM.values()) <= set(configured_secrets(configured))
    registry = make_channel(configured)
    assert isinstance(registry.channel_for("telegram"), TelegramChannel)
    local = make_channel(Settings(home=tmp_path, channel="file"))
    assert isinstance(local.channel_for("telegram"), FileChannel)
    with pytest.raises(ValidationError, match="HBGW_TELEGRAM_BOT_TOKEN and HBGW_TELEGRAM_SECRET"):
        Settings(telegram_bot_token=TOKEN)
    # Named without its settings: refused by the roles that serve platforms, not by beat.
    named = Settings(platforms="telegram")
    with pytest.raises(BadInput, match="HBGW_PLATFORMS names telegram"):
        Served.from_settings(named)
    with pytest.raises(ValidationError, match="1-256 characters of A-Z"):
        Settings(**{**TELEGRAM, "telegram_secret_token": "has spaces"})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="whole numbers like -1001234567890"):
        Settings(telegram_chats="-100,ops")
    assert set(ROLE_SECRETS["worker"]) >= {"telegram_bot_token", "telegram_secret_token"}
