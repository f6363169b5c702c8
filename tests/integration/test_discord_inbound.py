"""Discord's inbound side refuses before it stores: a forged, stale or oversized interaction
gets 401, 401 or 413, a guild outside HBGW_DISCORD_GUILDS 403, a shape Discord does not send
400, and none of them leaves a session, a message or a Redis key behind; each refusal is
counted by platform and reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

from nacl.signing import SigningKey
from support.discord_fixtures import (
    GUILD,
    Discord,
    api_clock,
    discord_deployment,
    interaction,
    signed_headers,
)


def stored(discord: Discord) -> tuple[int, int]:
    """Sessions and messages in SQL, and the Redis keys of the deployment's namespace."""
    sessions = discord.gw.store.sessions.list_sessions(limit=200)
    ns = discord.gw.settings.namespace
    keys = list(discord.gw.rt.client.scan_iter(match=f"{ns}:inbound:*"))
    return len(sessions), len(keys)


def rejects(discord: Discord, reason: str) -> float:
    with discord.client() as client:
        text = client.get("/metrics").text
    pattern = rf'hbgw_platform_inbound_rejects_total{{platform="discord",reason="{reason}"}} (\S+)'
    found = re.search(pattern, text)
    assert found, text
    return float(found.group(1))


def test_forged_stale_and_oversized_interactions_store_nothing(discord: Discord) -> None:
    body = json.dumps(interaction("ask", "set me up")).encode()
    empty = stored(discord)

    forged = discord.post(body, key=SigningKey.generate())
    assert forged.status_code == 401
    sentence = "The request does not carry a valid Discord signature."
    assert forged.json()["error"]["message"] == sentence
    with discord.client() as client:
        assert client.post("/platforms/discord/interactions", content=body).status_code == 401
        # Signed, then changed on the way: the signature covers every byte.
        stamp = int(api_clock().timestamp())
        headers = signed_headers(discord.key, body, stamp)
        tampered = body.replace(b"set me up", b"set me on")
        answer = client.post("/platforms/discord/interactions", content=tampered, headers=headers)
        assert answer.status_code == 401
        # Discord's endpoint check: a PING with a bad signature must get 401, not a PONG.
        ping = json.dumps({"type": 1}).encode()
        bad = {**signed_headers(discord.key, ping, stamp), "X-Signature-Ed25519": "00" * 64}
        assert (
            client.post("/platforms/discord/interactions", content=ping, headers=bad).status_code
            == 401
        )
    assert stored(discord) == empty

    stale = discord.post(body, age=301)
    assert stale.status_code == 401
    assert "older than five minutes" in stale.json()["error"]["message"]
    future = discord.post(body, age=-310)  # a clock ahead: refused too (int() floors the stamp)
    assert future.status_code == 401

    big = json.dumps(interaction("ask", "x" * 5000)).encode()
    assert discord.post(big).status_code == 413
    assert stored(discord) == empty
    assert discord.fake.calls == []
    assert rejects(discord, "signature") == 4
    assert rejects(discord, "replay") == 2
    assert rejects(discord, "too_large") == 1


def test_shapes_discord_does_not_send_are_refused(discord: Discord) -> None:
    empty = stored(discord)
    assert discord.post(b"{nope").status_code == 400
    assert discord.post(b"[1, 2]").status_code == 400
    component = {**interaction("ask", "hi"), "type": 3}  # a button press: this app has none
    assert discord.send(component).status_code == 400
    nameless = interaction("ask", "hi")
    del nameless["channel_id"]
    assert discord.send(nameless).status_code == 400
    assert stored(discord) == empty
    assert rejects(discord, "malformed") == 4
    unknown = discord.send(interaction("weather", "today"))
    assert unknown.status_code == 200
    assert (
        unknown.json()["data"]["flags"] == 64 and "/heartbeat" in unknown.json()["data"]["content"]
    )


def test_only_allowed_guilds(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    with discord_deployment(tmp_path, redis_url, redis_ns, discord_guilds=f"{GUILD},42") as d:
        elsewhere = d.send(interaction("ask", "hi", guild="666"))
        assert elsewhere.status_code == 403
        dm = d.send(interaction("ask", "hi", guild=None))  # no guild: not one of the allowed
        assert dm.status_code == 403
        assert d.gw.store.sessions.list_sessions(limit=10) == []
        assert rejects(d, "team") == 2
        assert d.send(interaction("ask", "hi")).status_code == 200
        [session] = d.gw.store.sessions.list_sessions(limit=10)
        assert session.owner == f"discord:{GUILD}" and session.thread is None


def test_a_dm_with_the_bot_is_a_session_of_its_own(discord: Discord) -> None:
    assert discord.send(interaction("ask", "psst", guild=None)).status_code == 200
    [session] = discord.gw.store.sessions.list_sessions(limit=10)
    assert (session.platform, session.owner) == ("discord", "discord:dm")
