"""Discord's pure parts: the Ed25519 check and its replay window, interactions mapped to
sessions, refusals classified, rate-limit buckets, the settings that come together, and the
registry and roles that hand Discord its client and its secret."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from nacl.signing import SigningKey
from pydantic import ValidationError

from hbgw.core.errors import BadInput, PermanentDelivery, TransientDelivery
from hbgw.core.logs import configured_secrets
from hbgw.core.settings import Settings
from hbgw.gateway.channels import make_channel
from hbgw.gateway.platforms.discord.channel import DiscordChannel, nonce
from hbgw.gateway.platforms.discord.commands import definitions
from hbgw.gateway.platforms.discord.interactions import read_interaction
from hbgw.gateway.platforms.discord.ratelimits import Buckets
from hbgw.gateway.platforms.discord.rest import classify, retry_after
from hbgw.gateway.platforms.discord.routes import router
from hbgw.gateway.platforms.discord.signature import DiscordSignature
from hbgw.gateway.platforms.guard import Reject
from hbgw.gateway.platforms.served import Served
from hbgw.local_api import LocalApi
from hbgw.procs import ROLE_SECRETS, secrets_env, settings_env

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
KEY = SigningKey.generate()
PUBLIC = KEY.verify_key.encode().hex()
DISCORD = {
    "discord_public_key": PUBLIC,
    "discord_bot_token": "MTA5.bot-token",
    "discord_application_id": "1001",
}


def signed(body: bytes, stamp: str, key: SigningKey = KEY) -> dict[str, str]:
    signature = key.sign(stamp.encode() + body).signature.hex()
    return {"x-signature-ed25519": signature, "x-signature-timestamp": stamp}


STAMP = str(int(NOW.timestamp()))


@pytest.mark.parametrize(
    ("headers", "body", "problem"),
    [
        (signed(b"{}", STAMP), b"{}", None),
        (signed(b"{}", str(int(NOW.timestamp()) - 299)), b"{}", None),
        (signed(b"{}", STAMP, SigningKey.generate()), b"{}", Reject.SIGNATURE),
        (signed(b"{}", STAMP), b'{"a": 1}', Reject.SIGNATURE),  # tampered body
        ({**signed(b"{}", STAMP), "x-signature-timestamp": "1"}, b"{}", Reject.SIGNATURE),
        (signed(b"{}", str(int(NOW.timestamp()) - 301)), b"{}", Reject.REPLAY),
        (signed(b"{}", str(int(NOW.timestamp()) + 301)), b"{}", Reject.REPLAY),
        (
            {"x-signature-ed25519": "zz" * 64, "x-signature-timestamp": STAMP},
            b"{}",
            Reject.SIGNATURE,
        ),
        (
            {"x-signature-ed25519": "00" * 10, "x-signature-timestamp": STAMP},
            b"{}",
            Reject.SIGNATURE,
        ),
        ({**signed(b"{}", STAMP), "x-signature-timestamp": "²³"}, b"{}", Reject.SIGNATURE),
        ({}, b"{}", Reject.SIGNATURE),
    ],
)
def test_signature_and_replay_window(
    headers: dict[str, str], body: bytes, problem: Reject | None
) -> None:
    assert DiscordSignature(PUBLIC, lambda: NOW).problem(headers, body) is problem


def _payload(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "11",
        "token": "tok",
        "application_id": "1001",
        "type": 2,
        "guild_id": "2002",
        "channel_id": "3003",
        "channel": {"id": "3003", "type": 0},
        "data": {
            "name": "heartbeat",
            "type": 1,
            "options": [{"name": "text", "value": " every 5m x "}],
        },
    }
    return {**base, **over}


def test_a_channel_and_a_thread_are_sessions_of_their_own() -> None:
    channel = read_interaction(_payload())
    assert channel is not None
    assert (channel.chat, channel.thread, channel.owner) == ("3003", None, "discord:2002")
    assert channel.command_line() == "/heartbeat every 5m x"
    thread = read_interaction(
        _payload(channel_id="4004", channel={"id": "4004", "type": 11, "parent_id": "3003"})
    )
    assert thread is not None and (thread.chat, thread.thread) == ("3003", "4004")
    forum_post = read_interaction(
        _payload(channel_id="4005", channel={"id": "4005", "type": 12, "parent_id": "3009"})
    )
    assert forum_post is not None and (forum_post.chat, forum_post.thread) == ("3009", "4005")
    dm = read_interaction(_payload(guild_id=None, channel={"id": "3003", "type": 1}))
    assert dm is not None and dm.owner == "discord:dm"
    bare = read_interaction(_payload(data={"name": "hb", "type": 1}))
    assert bare is not None and bare.command_line() == "/heartbeat"


def test_a_message_command_carries_its_target_message() -> None:
    data = {
        "name": "Ask the agent",
        "type": 3,
        "target_id": "8008",
        "resolved": {"messages": {"8008": {"id": "8008", "content": "why red?"}}},
    }
    asked = read_interaction(_payload(data=data))
    assert asked is not None
    assert (asked.text, asked.target, asked.idempotency_key) == ("why red?", "8008", "discord:8008")
    assert asked.command_line() == "why red?"


@pytest.mark.parametrize(
    "over",
    [{"data": None}, {"channel_id": None}, {"token": ""}, {"data": {"type": 1}}, {"id": "9" * 300}],
)
def test_shapes_discord_does_not_send(over: dict[str, Any]) -> None:
    assert read_interaction(_payload(**over)) is None


def _response(
    status: int, body: Any = None, headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


@pytest.mark.parametrize(
    ("status", "code", "kind", "reason"),
    [
        (403, 50001, PermanentDelivery, "missing_access"),
        (403, 50013, PermanentDelivery, "missing_permissions"),
        (404, 10003, PermanentDelivery, "unknown_channel"),
        (400, 50083, PermanentDelivery, "thread_archived"),
        (403, 0, PermanentDelivery, "http_403"),
        (400, 50035, TransientDelivery, "http_400"),
        (502, None, TransientDelivery, "http_502"),
    ],
)
def test_refusals_are_classified(
    status: int, code: int | None, kind: type[Exception], reason: str
) -> None:
    failure = classify(_response(status, {"message": "x", "code": code}))
    assert isinstance(failure, kind) and failure.reason == reason and failure.platform == "discord"
    assert str(failure).endswith(".")


def test_retry_after_reads_the_body_then_the_header() -> None:
    assert retry_after(_response(429, {"retry_after": 1.25})) == 1.25
    assert retry_after(_response(429, {}, {"Retry-After": "3"})) == 3.0
    assert retry_after(httpx.Response(429, text="<html>")) == 1.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_buckets_wait_for_their_refill_and_no_longer_than_allowed() -> None:
    clock = Clock()
    buckets = Buckets(max_wait=5, sleep=clock.sleep, monotonic=lambda: clock.now)
    route = "POST /channels/{id}/messages"
    spent = {
        "x-ratelimit-bucket": "b1",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset-after": "2",
    }
    buckets.learn(route, "c1", spent)
    assert buckets.wait_for(route, "c2")  # another channel's bucket is not this one
    assert clock.slept == []
    assert buckets.wait_for(route, "c1") and clock.slept == [2.0]
    assert buckets.wait_for(route, "c1") and clock.slept == [2.0]  # refilled: no second wait
    buckets.learn(route, "c1", {**spent, "x-ratelimit-reset-after": "60"})
    assert buckets.wait_for(route, "c1", patient=False) is False
    with pytest.raises(TransientDelivery, match="refills in 60 s"):
        buckets.wait_for(route, "c1")
    buckets.learn(route, "c1", {**spent, "x-ratelimit-remaining": "3"})
    assert buckets.wait_for(route, "c1")


def test_nonces_are_stable_and_short() -> None:
    key = b"bot-token"
    assert nonce(key, "msg:12", 0) == nonce(key, "msg:12", 0) != nonce(key, "msg:12", 1)
    assert len(nonce(key, "x" * 500, 3)) == 25


def settings(tmp_path: Path, **values: object) -> Settings:
    return Settings(**{"home": tmp_path, "channel": "file", **values})  # type: ignore[arg-type]


def test_discord_settings_come_together_and_the_token_is_a_secret(tmp_path: Path) -> None:
    configured = settings(tmp_path, **DISCORD, platforms="discord,cli")
    assert configured.masked()["discord_bot_token"] == "********"
    assert configured.masked()["discord_public_key"] == PUBLIC  # a public key is no secret
    assert "MTA5.bot-token" in configured_secrets(configured)
    assert "discord_bot_token" in ROLE_SECRETS["worker"]
    assert isinstance(make_channel(configured).channel_for("discord"), DiscordChannel)
    with pytest.raises(ValidationError, match="set HBGW_DISCORD_PUBLIC_KEY, HBGW_DISCORD_BOT"):
        settings(tmp_path, discord_bot_token="only")
    # Named without its settings: refused by the roles that serve platforms, not by beat.
    named = settings(tmp_path, platforms="discord")
    with pytest.raises(BadInput, match="HBGW_PLATFORMS names discord"):
        Served.from_settings(named)
    with pytest.raises(ValidationError, match="64 hexadecimal characters"):
        settings(tmp_path, **{**DISCORD, "discord_public_key": "abc"})
    with pytest.raises(ValidationError, match="digits only"):
        settings(tmp_path, **{**DISCORD, "discord_application_id": "my-app"})
    upper = settings(tmp_path, **{**DISCORD, "discord_public_key": PUBLIC.upper()})
    assert upper.discord_public_key == PUBLIC


def test_the_token_reaches_the_api_and_the_workers_only(tmp_path: Path) -> None:
    configured = settings(tmp_path, **DISCORD)
    assert secrets_env(configured, "worker")["HBGW_DISCORD_BOT_TOKEN"] == "MTA5.bot-token"
    assert "HBGW_DISCORD_BOT_TOKEN" not in secrets_env(configured, "beat")
    with socket.socket() as unbound:
        api = LocalApi("http://127.0.0.1:8780", "local", "tok", generated=True, listener=unbound)
        assert api.env(configured)["HBGW_DISCORD_BOT_TOKEN"] == "MTA5.bot-token"
    # The public key and the application id are plain settings, handed to every role.
    env = settings_env(configured)
    assert env["HBGW_DISCORD_PUBLIC_KEY"] == PUBLIC and "HBGW_DISCORD_BOT_TOKEN" not in env


def test_the_docs_name_the_route_and_the_commands() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "platforms.md").read_text()
    assert [route.path for route in router.routes] == ["/platforms/discord/interactions"]  # type: ignore[attr-defined]
    assert "https://hbgw.example.com/platforms/discord/interactions" in guide
    for command in definitions():
        name = command["name"]
        assert (f"`/{name} text:" if command["type"] == 1 else f"**{name}**") in guide, name
