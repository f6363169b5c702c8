"""Issue 29, finding 1: an owner token made the bots post into any chat. Rerun of each attack
step against a real API (uvicorn on loopback, SQLite, Redis) and the platform clients against
the fakes of Slack, Telegram and Discord (official clients through their base URLs): refused
with a sentence, nothing stored, nothing reaching the platform; the operator's ways (the admin
token, a bound chat, the platform's signed inbound) still work."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.api_fixtures import ALICE, TOKENS, Api
from support.discord_fixtures import APP_ID, PUBLIC_KEY
from support.discord_fixtures import BOT_TOKEN as DISCORD_TOKEN
from support.fake_discord import FakeDiscord, fake_discord
from support.fake_slack import FakeSlack, fake_slack
from support.fake_telegram import FakeTelegram, fake_telegram
from support.harness import gateway_settings, wait_until
from support.slack_fixtures import CHANNEL, TEAM, Slack, slack_deployment
from support.telegram_fixtures import telegram_settings_values
from support.webhook_fixtures import ADMIN, webhook_deployment

from hbgw.core.clock import utcnow
from hbgw.core.errors import PermanentDelivery
from hbgw.gateway.channels.registry import ChannelRegistry
from hbgw.workers.ports import Address

VICTIMS = {"slack": "C0VICTIM", "telegram": "-100777", "discord": "999", "webhook": "partner"}
ATTACK = "echo: <!channel> URGENT <https://evil.example|https://slack.com/login>"


def test_an_owner_token_opens_no_session_on_a_strangers_chat(api: Api) -> None:
    """Pins finding 1: alice's token created slack/telegram/discord/webhook sessions on any
    chat. Now 403 with a sentence, nothing stored; the admin token and a bound chat may."""
    with api.owner(ALICE) as alice, api.admin() as admin:
        for platform, chat in VICTIMS.items():
            refused = alice.post("/v1/sessions", json={"platform": platform, "chat": chat})
            assert refused.status_code == 403, refused.text
            error = refused.json()["error"]
            assert error["code"] == "forbidden"
            assert "HBGW_OWNER_CHATS" in error["message"] and chat in error["message"]
            job = {"schedule": "every 2h", "prompt": "post", "platform": platform, "chat": chat}
            assert alice.post("/v1/cron", json=job).status_code == 403  # each run a session
        assert api.gw.store.sessions.list_sessions(owner=ALICE) == []
        assert api.gw.store.jobs.jobs(owner=ALICE) == []
        for platform, chat in VICTIMS.items():
            made = admin.post("/v1/sessions", json={"platform": platform, "chat": chat})
            assert made.status_code == 201, made.text
        bound = alice.post("/v1/sessions", json={"platform": "slack", "chat": "C1"})
        assert bound.status_code == 201 and bound.json()["owner"] == ALICE
        job = {"schedule": "every 2h", "prompt": "post", "platform": "slack", "chat": "CJ"}
        assert alice.post("/v1/cron", json=job).status_code == 201
        for platform in ("api", "cli"):
            own = alice.post("/v1/sessions", json={"platform": platform, "chat": "me"})
            assert own.status_code == 201, own.text


def test_the_signed_inbound_still_opens_its_chats_session(slack: Slack) -> None:
    """The person proved they are in the chat: a signed Slack command makes the session that
    an owner token may not, owned by its workspace."""
    with slack.client() as anyone:
        headers = {"Authorization": "Bearer tok-alice-7f3a9c"}
        body = {"platform": "slack", "chat": CHANNEL}
        assert anyone.post("/v1/sessions", json=body, headers=headers).status_code == 403
    assert slack.command("hb status").status_code == 200
    [session] = slack.gw.store.sessions.list_sessions(owner=f"slack:{TEAM}")
    assert (session.platform, session.chat) == ("slack", CHANNEL)


@pytest.fixture
def fakes() -> Iterator[tuple[FakeSlack, FakeTelegram, FakeDiscord]]:
    with fake_slack() as slack, fake_telegram() as telegram, fake_discord() as discord:
        yield slack, telegram, discord


def registry(
    tmp_path: Path,
    redis_url: str,
    redis_ns: str,
    fakes: tuple[FakeSlack, FakeTelegram, FakeDiscord],
    **overrides: object,
) -> ChannelRegistry:
    slack, telegram, discord = fakes
    values: dict[str, object] = {
        **telegram_settings_values(telegram),
        "platforms": "slack,telegram,discord,cli",
        "slack_signing_secret": "8f742231b10e8888abcd99yyyzzz85a5",
        "slack_bot_token": "xoxb-17-fake-bot-token",
        "slack_api_url": slack.api_url,
        "discord_public_key": PUBLIC_KEY,
        "discord_bot_token": DISCORD_TOKEN,
        "discord_application_id": APP_ID,
        "discord_api_url": discord.api_url,
        "telegram_chats": "-100123",
        "slack_teams": TEAM,
        "discord_guilds": "2002",
        "owner_chats": "alice=slack:C1,discord:3004",
        **overrides,
    }
    return ChannelRegistry.from_settings(gateway_settings(tmp_path, redis_url, redis_ns, **values))


def send(channels: ChannelRegistry, address: Address, text: str = "hello") -> None:
    channels.send(address, text, session_id="s1", kind="reply", delivery_key="msg:1")


def test_outbound_to_a_chat_outside_the_allowlists_never_reaches_the_platform(
    tmp_path: Path,
    redis_url: str,
    redis_ns: str,
    fakes: tuple[FakeSlack, FakeTelegram, FakeDiscord],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Pins finding 1: the allowlists filtered inbound only; sessions on any chat were
    delivered to. Refused for good (reason not_allowed), one log line, no request."""
    slack, telegram, discord = fakes
    channels = registry(tmp_path, redis_url, redis_ns, fakes)
    refused = [
        Address("telegram", "-100777", owner="alice"),
        Address("slack", "C0VICTIM", owner="alice"),  # an owner's, unbound (made before)
        Address("slack", "C0VICTIM", owner="slack:T0OTHER"),  # another workspace's
        Address("slack", "C0VICTIM", owner=None),
        Address("discord", "999", owner="alice"),
        Address("discord", "999", owner="discord:dm"),
    ]
    for address in refused:
        with pytest.raises(PermanentDelivery) as failed:
            send(channels, address)
        assert failed.value.reason == "not_allowed"
        channels.typing(address, session_id="s1")
    assert slack.calls == [] and telegram.calls == [] and discord.calls == []
    lines = [r for r in caplog.records if getattr(r, "action", "") == "deliver.not_allowed"]
    assert len(lines) == len(refused)
    send(channels, Address("telegram", "-100123", owner="telegram:1"))
    send(channels, Address("slack", CHANNEL, owner=f"slack:{TEAM}"))
    send(channels, Address("slack", "C1", owner="alice"))  # bound by the operator
    send(channels, Address("discord", "3003", owner="discord:2002"))
    send(channels, Address("discord", "3004", owner="alice"))
    assert [c.params["chat_id"] for c in telegram.sends()] == ["-100123"]
    assert [c.params["channel"] for c in slack.posts()] == [CHANNEL, "C1"]
    assert [c.channel for c in discord.of("message")] == ["3003", "3004"]
    channels.close()


def test_slack_text_arrives_escaped_and_pings_nobody(
    tmp_path: Path,
    redis_url: str,
    redis_ns: str,
    fakes: tuple[FakeSlack, FakeTelegram, FakeDiscord],
) -> None:
    """Pins finding 1: model and user text reached Slack unescaped (<!channel>, a disguised
    link); Discord's and Telegram's sends must not ping or parse markup either."""
    slack, telegram, discord = fakes
    channels = registry(tmp_path, redis_url, redis_ns, fakes)
    send(channels, Address("slack", CHANNEL, owner=f"slack:{TEAM}"), ATTACK)
    [post] = slack.posts()
    assert post.params["text"] == (
        "echo: &lt;!channel&gt; URGENT &lt;https://evil.example|https://slack.com/login&gt;"
    )
    send(channels, Address("discord", "3003", owner="discord:2002"), "@everyone <@&1> hi")
    [sent] = discord.of("message")
    assert sent.body["allowed_mentions"] == {"parse": []}
    send(channels, Address("telegram", "-100123", owner="telegram:1"), "<b>x</b> *y*")
    [message_sent] = telegram.sends()
    assert "parse_mode" not in message_sent.params
    assert message_sent.params["text"] == "<b>x</b> *y*"
    channels.close()
    allowed = registry(tmp_path, redis_url, redis_ns, fakes, slack_allow_mentions=True)
    send(allowed, Address("slack", CHANNEL, owner=f"slack:{TEAM}"), "<!here> deploy")
    assert slack.posts()[-1].params["text"] == "<!here> deploy"  # the operator allowed it
    allowed.close()


def test_an_owners_webhook_session_posts_to_its_own_url_never_the_operators(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    """Pins finding 1: a webhook session an owner token made with any chat and no URL POSTed
    the tenant's text to HBGW_WEBHOOK_URL, signed, as if the partner's own chat spoke."""
    binding = {"owner_chats": "alice=webhook:room-A"}
    with webhook_deployment(tmp_path, redis_url, redis_ns, **binding) as webhook:
        store = webhook.gw.store
        with webhook.client() as client:
            as_alice = {"Authorization": f"Bearer {TOKENS[ALICE]}"}
            victim = {"platform": "webhook", "chat": "room-VICTIM"}
            assert client.post("/v1/sessions", json=victim, headers=as_alice).status_code == 403
            no_url = client.post(
                "/v1/sessions", json={"platform": "webhook", "chat": "room-A"}, headers=as_alice
            )
            assert no_url.status_code == 422, no_url.text
            assert "HBGW_WEBHOOK_URL" in no_url.json()["error"]["message"]
            assert store.sessions.list_sessions(owner=ALICE) == []
            own = {"platform": "webhook", "chat": "room-A", "webhook_url": "https://h.example/a"}
            made = client.post("/v1/sessions", json=own, headers=as_alice)
            assert made.status_code == 201, made.text
            sid = made.json()["id"]
            assert store.webhooks.webhook_url(sid) == "https://h.example/a"
            path = f"/v1/sessions/{sid}/webhook"
            to_default = client.put(path, json={"url": None}, headers=as_alice)
            assert to_default.status_code == 403
            assert "HBGW_WEBHOOK_URL" in to_default.json()["error"]["message"]
            moved = client.put(path, json={"url": "https://h.example/b"}, headers=as_alice)
            assert moved.status_code == 200, moved.text
            assert store.webhooks.webhook_url(sid) == "https://h.example/b"
            job = {"schedule": "every 2h", "prompt": "p", "platform": "webhook", "chat": "room-A"}
            assert client.post("/v1/cron", json=job, headers=as_alice).status_code == 403
            in_chat = {"text": "/cron add every 2h -- post as the partner"}
            said = client.post(f"/v1/sessions/{sid}/messages", json=in_chat, headers=as_alice)
            assert said.json()["ok"] is False and "HBGW_WEBHOOK_URL" in said.json()["reply"]
            own_job = {"schedule": "every 2h", "prompt": "p", "session_id": sid}
            assert client.post("/v1/cron", json=own_job, headers=as_alice).status_code == 201
            assert [j.route.session_id for j in store.jobs.jobs(owner=ALICE)] == [sid]
            stray = {"platform": "cli", "chat": "me", "webhook_url": "https://h.example/c"}
            assert client.post("/v1/sessions", json=stray, headers=as_alice).status_code == 422
            admins = client.post("/v1/sessions", json=victim, headers=ADMIN)
            assert admins.status_code == 201  # the operator's: HBGW_WEBHOOK_URL is theirs
            assert webhook.route(admins.json()["id"], None).status_code == 200
        assert webhook.message("m1", "hello").status_code == 202  # the partner's signed inbound
        assert (
            store.webhooks.webhook_url(webhook.message("m2", "again").json()["session_id"]) is None
        )


def test_a_worker_delivers_the_workspaces_sessions_and_refuses_an_owners_stray_one(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    """Pins finding 1 on the fire path: with HBGW_SLACK_TEAMS set, the session a signed Slack
    command made (owner ``slack:<team>``) is delivered by a real worker, while a session an
    owner token made on another chat before this fix (owner ``alice``) never reaches Slack: its
    run ends failed and its heartbeat is paused for the route."""
    with slack_deployment(tmp_path, redis_url, redis_ns, slack_teams=TEAM) as slack:
        gw = slack.gw
        stray = gw.store.sessions.create_session(
            platform="slack", chat="C0VICTIM", owner=ALICE, now=utcnow()
        ).id
        gw.due_now(stray)
        with gw.worker("w1"):
            wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1"], 30, "w1 live")
            assert slack.command("heartbeat every 1m check the deploy").status_code == 200
            [own] = gw.store.sessions.list_sessions(owner=f"slack:{TEAM}")
            gw.tick()
            gw.final_runs(own.id)
            gw.final_runs(stray)
        assert [c.params["channel"] for c in slack.fake.posts()] == [CHANNEL]
        assert [r.state for r in gw.runs(stray)] == ["failed"]
        status = gw.store.heartbeats.heartbeat_status(stray, utcnow()).to_json()
        assert status["status"] == "paused", status
