"""Telegram's webhook refuses before it stores: a missing or wrong secret token gets 401, an
oversized body 413, a shape Telegram does not send 400, and none of them leaves a session, a
message or a Redis key behind; a chat outside HBGW_TELEGRAM_CHATS is answered 200 (so Telegram
does not repeat it) and dropped; each refusal is counted by platform and reason. Without the
settings the route does not exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from support.api_fixtures import api_overrides
from support.harness import Gateway, gateway_settings, wait_until
from support.http_server import serving
from support.telegram_fixtures import SECRET, Telegram, message_update, telegram_deployment

from hbgw.gateway.api.app import create_app


def stored(telegram: Telegram) -> tuple[int, int, int]:
    """Sessions in SQL, and the Redis keys of the deployment's namespace."""
    sessions = telegram.gw.store.sessions.list_sessions(limit=200)
    messages = sum(len(telegram.gw.store.messages.list_messages(s.id, limit=50)) for s in sessions)
    pattern = f"{telegram.gw.settings.namespace}:inbound:*"
    return len(sessions), messages, len(list(telegram.gw.rt.client.scan_iter(match=pattern)))


def rejects(telegram: Telegram, reason: str) -> float:
    with telegram.client() as client:
        text = client.get("/metrics").text
    pattern = rf'hbgw_platform_inbound_rejects_total{{platform="telegram",reason="{reason}"}} (\S+)'
    found = re.search(pattern, text)
    assert found, text
    return float(found.group(1))


def test_forged_and_oversized_updates_store_nothing(telegram: Telegram) -> None:
    body = json.dumps(message_update(1, "/hb every 1m sneak in")).encode()
    empty = stored(telegram)

    forged = telegram.post(body, secret="not-the-secret")
    assert forged.status_code == 401
    assert forged.json()["error"]["message"] == (
        "The request does not carry this bot's secret token (X-Telegram-Bot-Api-Secret-Token)."
    )
    assert telegram.post(body, secret=None).status_code == 401
    assert telegram.post(body, secret=SECRET + "x").status_code == 401
    assert telegram.post(body, secret=SECRET[:-1]).status_code == 401
    assert telegram.post(body, secret="ünïcode".encode("latin-1")).status_code == 401

    big = json.dumps(message_update(2, "x" * 5000)).encode()
    oversized = telegram.post(big)
    assert oversized.status_code == 413
    assert stored(telegram) == empty
    assert rejects(telegram, "signature") == 5
    assert rejects(telegram, "too_large") == 1
    assert telegram.fake.calls == []  # nothing was answered either

    # The same update with the secret is taken.
    assert telegram.post(body).status_code == 200
    assert stored(telegram)[0] == empty[0] + 1


def test_malformed_and_ignored_updates(telegram: Telegram) -> None:
    assert telegram.post(b"{nope").status_code == 400
    assert telegram.post(b'{"message": {}}').status_code == 400  # no update_id
    assert telegram.post(b'[{"update_id": 1}]').status_code == 400
    assert rejects(telegram, "malformed") == 3
    # Shapes the bot does not take are answered 200 (Telegram would repeat them) and dropped.
    edited = {"update_id": 5, "edited_message": message_update(5, "edit")["message"]}
    bot = message_update(6, "/hb every 1m", sender={"id": 1, "is_bot": True, "first_name": "b"})
    photo = message_update(7, "")
    for update in (edited, bot, photo, {"update_id": 8}):
        assert telegram.update(update).status_code == 200
    assert stored(telegram) == (0, 0, 0)


def test_only_allowed_chats(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    with telegram_deployment(tmp_path, redis_url, redis_ns, telegram_chats="-100777") as tg:
        assert tg.update(message_update(1, "hello")).status_code == 200  # the default chat
        assert stored(tg) == (0, 0, 0)
        assert rejects(tg, "chat") == 1
        assert tg.update(message_update(2, "hello", chat=-100777, topic=None)).status_code == 200
        assert [s.chat for s in tg.gw.store.sessions.list_sessions(limit=10)] == ["-100777"]


def test_the_usage_and_status_are_answered_in_the_chat(telegram: Telegram) -> None:
    fake = telegram.fake
    assert telegram.update(message_update(1, "/start", chat=5550001, topic=None)).status_code == 200
    assert telegram.update(message_update(2, "/hb pause", topic=None)).status_code == 200
    wait_until(lambda: len(fake.sends()) == 2, 30, "two answers")
    usage, pause = sorted(fake.sends(), key=lambda c: c.params["chat_id"], reverse=True)
    assert usage.params["chat_id"] == "5550001"
    assert usage.params["text"].startswith("Send /heartbeat (or /hb) with a command")
    assert "no heartbeat" in pause.params["text"].lower()


def test_no_route_without_the_settings(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    settings = gateway_settings(tmp_path, redis_url, redis_ns, **api_overrides())
    gw = Gateway(settings, redis_url)
    try:
        with serving(create_app(settings, redis_url=redis_url)) as url:
            answer = httpx.post(f"{url}/platforms/telegram/webhook", json={"update_id": 1})
        assert answer.status_code == 404
    finally:
        gw.close()
