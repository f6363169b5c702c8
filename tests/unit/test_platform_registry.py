"""The channel registry: a turn's channel is its session's platform's, and only that one; the
platform settings are secrets where they should be, and half a Slack configuration is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from nacl.signing import SigningKey
from pydantic import ValidationError

from hbgw.core.errors import BadInput, PermanentDelivery
from hbgw.core.logs import configured_secrets
from hbgw.core.settings import Settings
from hbgw.gateway.channels import make_channel
from hbgw.gateway.channels.file import FileChannel, read_records
from hbgw.gateway.platforms.served import Served
from hbgw.gateway.platforms.slack.channel import SlackChannel
from hbgw.gateway.platforms.slack.routes import router
from hbgw.workers.ports import Address

DOCS = Path(__file__).resolve().parents[2] / "docs"
SLACK = {"slack_signing_secret": "sign-3f9a1c", "slack_bot_token": "xoxb-1-2-tok"}


def settings(tmp_path: Path, **values: object) -> Settings:
    base: dict[str, object] = {"home": tmp_path, "channel": "file"}
    return Settings(**{**base, **values})  # type: ignore[arg-type]


def test_every_platform_by_default_each_through_its_own_client(tmp_path: Path) -> None:
    registry = make_channel(settings(tmp_path, **SLACK))
    assert isinstance(registry.channel_for("slack"), SlackChannel)
    assert isinstance(registry.channel_for("cli"), FileChannel)
    # Without Slack's settings, '*' records Slack's sessions in HBGW_CHANNEL (tests, demo).
    local = make_channel(settings(tmp_path / "b"))
    assert isinstance(local.channel_for("slack"), FileChannel)


def test_a_platform_not_named_gets_nothing(tmp_path: Path) -> None:
    registry = make_channel(settings(tmp_path, platforms="cli"))
    registry.send(Address("cli", "me"), "hi", session_id="s1", kind="reply", delivery_key="k1")
    with pytest.raises(PermanentDelivery, match="Platform slack is not enabled here") as refused:
        registry.send(
            Address("slack", "C1", "1.2"), "hi", session_id="s2", kind="reply", delivery_key="k2"
        )
    assert refused.value.reason == "not_served" and refused.value.platform == "slack"
    records = read_records(tmp_path / "deliveries.jsonl")
    assert [r["platform"] for r in records] == ["cli"]  # no fallback: nothing else was written


def test_slack_settings_are_secrets_and_come_together(tmp_path: Path) -> None:
    configured = settings(tmp_path, **SLACK)
    shown = configured.masked()
    assert shown["slack_signing_secret"] == "********" and shown["slack_bot_token"] == "********"
    assert set(SLACK.values()) <= set(configured_secrets(configured))
    with pytest.raises(ValidationError, match="HBGW_SLACK_SIGNING_SECRET and HBGW_SLACK_BOT"):
        settings(tmp_path, slack_bot_token="xoxb-only")
    # Named without its settings: refused by the roles that serve platforms, not by beat.
    named = settings(tmp_path, platforms="slack")
    with pytest.raises(BadInput, match="HBGW_PLATFORMS names slack"):
        Served.from_settings(named)


def test_the_manifest_names_the_routes_the_app_serves() -> None:
    manifest = (DOCS / "slack-app-manifest.yaml").read_text()
    urls = set(re.findall(r"https://hbgw\.example\.com(/\S+)", manifest))
    assert urls == {route.path for route in router.routes}  # type: ignore[attr-defined]
    for scope in ("chat:write", "commands", "channels:history", "im:history"):
        assert f"- {scope}" in manifest


def test_close_closes_every_platform_client(tmp_path: Path) -> None:
    """A worker's shutdown closes the platform clients' pools (an httpx pool left open holds its
    sockets until the process exits, and warns under -W error)."""
    configured = settings(
        tmp_path,
        **SLACK,
        telegram_bot_token="123:tok",
        telegram_secret_token="s3cret-token_1",
        discord_public_key=SigningKey.generate().verify_key.encode().hex(),
        discord_bot_token="MTA5.bot-token",
        discord_application_id="1001",
        webhook_secret="whsec-x",
    )
    registry = make_channel(configured)
    clients = {
        "telegram": registry.own["telegram"].api.http,  # type: ignore[attr-defined]
        "discord": registry.own["discord"].rest.client,  # type: ignore[attr-defined]
        "webhook": registry.own["webhook"].client,  # type: ignore[attr-defined]
    }
    assert not any(client.is_closed for client in clients.values())
    registry.close()
    assert {name: client.is_closed for name, client in clients.items()} == dict.fromkeys(
        clients, True
    )
