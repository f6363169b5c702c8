"""Every path that makes a session, a heartbeat or a cron job counts against the owner's quota
(issue 29, finding 6: with HBGW_API_MAX_HEARTBEATS_PER_OWNER=2 the API refused a third, but
signed webhook commands, four Telegram forum topics and the model's set_heartbeat tool set
more; a Discord interaction made a session past it). Each path is refused in its own medium,
nothing stored, on SQLite and PostgreSQL: the API with 429 and its words, a webhook command,
a Telegram topic and a Discord interaction with the sentence as the command's answer, the
model's tool with an error the model reads. Real Redis and SQL, the API under uvicorn, the
platforms' fakes and a fake model endpoint on loopback, a real worker."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine
from support.api_fixtures import ADMIN_TOKEN, BOB, TOKENS, api_overrides
from support.discord_fixtures import discord_deployment, interaction
from support.fake_openai import Text, ToolCall, openai_gateway, set_args
from support.harness import Gateway, gateway_settings, wait_until
from support.http_server import serving
from support.scenarios import send
from support.slack_fixtures import BOT, message, slack_deployment
from support.telegram_fixtures import GROUP, OWNER, message_update, telegram_deployment
from support.webhook_fixtures import webhook_deployment

from hbgw.core.clock import utcnow
from hbgw.gateway.api.app import create_app
from hbgw.gateway.inbound import Queued

LIMITS = {
    "api_max_sessions_per_owner": 3,
    "api_max_heartbeats_per_owner": 2,
    "api_max_jobs_per_owner": 1,
}
HEARTBEATS_SENTENCE = (
    "This owner already has 2 heartbeats, the most allowed (HBGW_API_MAX_HEARTBEATS_PER_OWNER); "
    "close some first, or ask the operator for more."
)
SESSIONS_SENTENCE = (
    "This owner already has 3 sessions, the most allowed (HBGW_API_MAX_SESSIONS_PER_OWNER); "
    "close some first, or ask the operator for more."
)


@pytest.fixture
def database(db_url: str, migrated_engine: Engine) -> str:
    """SQLite, and PostgreSQL in a fresh schema: migrated, as ``hbgw migrate`` leaves it."""
    del migrated_engine  # its upgrade is what is needed
    return db_url


def _live_heartbeats(gw: Gateway, owner: str) -> int:
    sessions = gw.store.sessions.list_sessions(owner=owner, limit=50)
    statuses = [gw.store.heartbeats.heartbeat_status(s.id, utcnow()).status for s in sessions]
    return sum(status in ("active", "paused") for status in statuses)


def test_the_api_answers_429_with_its_words(
    tmp_path: Path, redis_url: str, redis_ns: str, database: str
) -> None:
    settings = gateway_settings(
        tmp_path, redis_url, redis_ns, database_url=database, **api_overrides(), **LIMITS
    )
    gw = Gateway(settings, redis_url)
    auth = {"Authorization": f"Bearer {TOKENS[BOB]}"}
    spec = {"schedule": "every 5m", "prompt": "check"}
    try:
        with serving(create_app(settings, celery_app=gw.app, redis_url=redis_url)) as url:
            with httpx.Client(base_url=url, headers=auth, timeout=30) as bob:
                made = [
                    bob.post("/v1/sessions", json={"platform": "api", "chat": f"c{n}"})
                    for n in range(4)
                ]
                assert [r.status_code for r in made] == [201, 201, 201, 429]
                assert made[3].json()["error"] == {
                    "code": "quota_exceeded",
                    "message": SESSIONS_SENTENCE,
                }
                sids = [r.json()["session_id"] for r in made[:3]]
                for sid in sids[:2]:
                    assert bob.put(f"/v1/sessions/{sid}/heartbeat", json=spec).status_code == 200
                third = bob.put(f"/v1/sessions/{sids[2]}/heartbeat", json=spec)
                assert third.status_code == 429
                assert third.json()["error"]["message"] == HEARTBEATS_SENTENCE
                typed = bob.post(f"/v1/sessions/{sids[2]}/messages", json={"text": "/hb 5m x"})
                assert typed.status_code == 429
            admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            with httpx.Client(base_url=url, headers=admin, timeout=30) as operator:
                body = {"platform": "api", "chat": "c9", "owner": BOB}
                assert operator.post("/v1/sessions", json=body).status_code == 201
        assert _live_heartbeats(gw, BOB) == 2
    finally:
        gw.close()


def test_signed_webhook_commands_are_held_to_the_quotas(
    tmp_path: Path, redis_url: str, redis_ns: str, database: str
) -> None:
    with webhook_deployment(tmp_path, redis_url, redis_ns, database_url=database, **LIMITS) as hook:

        def command(n: int, text: str, chat: str) -> dict[str, object]:
            answer = hook.message(f"m{n}", text, chat=chat, owner=BOB)
            assert answer.status_code == 200, answer.text
            body: dict[str, object] = answer.json()
            return body

        for n in range(2):
            assert command(n, "/heartbeat every 5m check", f"room-{n}")["ok"] is True
        refused = command(2, "/heartbeat every 5m check", "room-2")
        assert refused["ok"] is False and refused["reply"] == HEARTBEATS_SENTENCE
        assert refused["error"] == {"code": "quota_exceeded", "message": HEARTBEATS_SENTENCE}
        assert command(3, "/cron add every 2h -- report", "room-2")["ok"] is True
        jobs = command(4, "/cron add every 2h -- again", "room-2")
        assert jobs["ok"] is False and "HBGW_API_MAX_JOBS_PER_OWNER" in str(jobs["reply"])
        no_room = command(5, "/heartbeat status", "room-3")  # a fourth chat: no session left
        assert no_room["ok"] is False and no_room["reply"] == SESSIONS_SENTENCE
        plain = hook.message("m6", "hello", chat="room-4", owner=BOB)
        assert plain.status_code == 429
        assert plain.json()["error"]["code"] == "quota_exceeded"
        assert _live_heartbeats(hook.gw, BOB) == 2
        assert len(hook.gw.store.sessions.list_sessions(owner=BOB)) == 3
        assert len(hook.gw.store.jobs.jobs(owner=BOB)) == 1


def test_telegram_forum_topics_are_held_to_the_quotas(
    tmp_path: Path, redis_url: str, redis_ns: str, database: str
) -> None:
    with telegram_deployment(tmp_path, redis_url, redis_ns, database_url=database, **LIMITS) as tg:
        for topic in range(1, 5):  # one session per topic; the fourth is beyond the sessions
            update = message_update(topic, "/heartbeat every 5m check", topic=topic)
            assert tg.update(update).status_code == 200
        answers = wait_until(lambda: len(tg.fake.sends()) == 4 and tg.fake.sends(), 30, "answers")
        texts = {c.params.get("message_thread_id"): c.params["text"] for c in answers}
        assert [texts[t].startswith("♥ Heartbeat set") for t in (1, 2)] == [True, True]
        assert texts[3] == HEARTBEATS_SENTENCE
        assert texts[4] == SESSIONS_SENTENCE  # told in the topic that made no session
        assert all(c.params["chat_id"] == str(GROUP) for c in answers)
        assert _live_heartbeats(tg.gw, OWNER) == 2
        assert len(tg.gw.store.sessions.list_sessions(limit=10)) == 3


def test_the_models_set_heartbeat_tool_is_held_to_the_quota(
    tmp_path: Path, redis_url: str, redis_ns: str, database: str
) -> None:
    limits = {"api_max_heartbeats_per_owner": 1, "agent_heartbeat_write": True}
    with openai_gateway(tmp_path, redis_url, redis_ns, database_url=database, **limits) as (
        gw,
        endpoint,
    ):
        made = [
            gw.store.sessions.create_session(
                platform="slack", chat=f"C{n}", owner=BOB, now=utcnow()
            )
            for n in range(2)
        ]
        gw.heartbeat(made[0].id)  # the owner's one heartbeat
        endpoint.then(ToolCall("set_heartbeat", set_args("every 10m", "check the build")))
        endpoint.then(Text("I could not set it."))
        with gw.worker("w1"):
            sent = send(gw, made[1].id, "please check the build every 10 minutes")
            assert isinstance(sent, Queued)
            wait_until(lambda: gw.store.messages.reply_for(sent.message_id), what="the reply")
        second = endpoint.requests()[1]
        [tool] = [m for m in second["messages"] if m["role"] == "tool"]
        assert (
            tool["content"]
            == f"Error: {HEARTBEATS_SENTENCE.replace('2 heartbeats', '1 heartbeats')}"
        )
        assert gw.store.heartbeats.get_heartbeat(made[1].id) is None


def test_discord_interactions_are_held_to_the_session_quota(
    tmp_path: Path, redis_url: str, redis_ns: str, database: str
) -> None:
    with discord_deployment(
        tmp_path, redis_url, redis_ns, database_url=database, api_max_sessions_per_owner=1
    ) as discord:
        assert discord.send(interaction("heartbeat", "every 5m check")).status_code == 200
        wait_until(lambda: discord.fake.of("edit"), 30, "the first answer")
        in_thread = interaction("heartbeat", "every 5m check", thread=True)
        assert discord.send(in_thread).status_code == 200  # a thread is a session of its own
        edits = wait_until(lambda: len(discord.fake.of("edit")) == 2 and discord.fake.of("edit"))
        assert edits[0].content.startswith("♥ Heartbeat set")
        assert edits[1].content == SESSIONS_SENTENCE.replace("3 sessions", "1 sessions")
        assert len(discord.gw.store.sessions.list_sessions(limit=10)) == 1


def test_slack_commands_and_messages_are_held_to_the_session_quota(
    tmp_path: Path, redis_url: str, redis_ns: str, database: str
) -> None:
    with slack_deployment(
        tmp_path, redis_url, redis_ns, database_url=database, api_max_sessions_per_owner=1
    ) as slack:
        assert slack.command("heartbeat status").status_code == 200
        other = slack.command("heartbeat every 5m check", channel="C0OTHER")
        assert other.json()["text"] == SESSIONS_SENTENCE.replace("3 sessions", "1 sessions")
        asked = message(f"<@{BOT}> hello", "1700000000.000900", channel="C0THIRD")
        assert slack.event("EvQ1", asked).status_code == 200
        told = wait_until(lambda: slack.fake.posts(channel="C0THIRD"), 30, "the refusal")
        assert told[0].params["text"] == other.json()["text"]
        assert len(slack.gw.store.sessions.list_sessions(limit=10)) == 1
