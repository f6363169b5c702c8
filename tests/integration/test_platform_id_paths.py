"""Issue 29, finding 5: a Discord chat id that walks out of its URL path.

``POST /v1/sessions {"platform": "discord", "chat": "1/../../guilds/777/prune?x="}`` then a
message made the worker send ``POST /api/v10/guilds/777/prune?x=/messages`` with the bot token.
Every path that makes a session refuses such an id with a sentence (the HTTP API, `hbgw
session create`, a routed cron job, a platform's inbound through ``session_at``), and a row
stored before the check never reaches the fake Discord as a path."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text
from support.api_fixtures import Api
from support.cli_fixtures import Hbgw
from support.discord_fixtures import BOT_TOKEN
from support.fake_discord import FakeDiscord, fake_discord
from support.seed import T0

from hbgw.core.errors import BadInput, PermanentDelivery
from hbgw.gateway.platforms.discord.channel import DiscordChannel
from hbgw.sessions.store import Store
from hbgw.workers.ports import Address

TRAVERSAL = "1/../../guilds/777/prune?x="
SENTENCE = "is not a discord chat id — give a Discord snowflake"


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    with fake_discord() as running:
        yield running


def test_the_api_refuses_a_traversing_discord_chat_and_stores_nothing(api: Api) -> None:
    with api.admin() as admin:
        refused = admin.post("/v1/sessions", json={"platform": "discord", "chat": TRAVERSAL})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "invalid_input"
        assert SENTENCE in refused.json()["error"]["message"]
        thread = admin.post(
            "/v1/sessions", json={"platform": "discord", "chat": "3003", "thread": "4/../9"}
        )
        assert thread.status_code == 422 and "not a discord thread id" in thread.text
        assert admin.get("/v1/sessions").json()["sessions"] == []


def test_the_cli_refuses_it_for_a_session_and_for_a_cron_job_route(hbgw: Hbgw) -> None:
    made = hbgw("session", "create", "--platform", "discord", "--chat", TRAVERSAL)
    assert made.code == 2 and SENTENCE in made.err, made
    job = hbgw("cron", "add", "--platform", "discord", "--chat", TRAVERSAL, "in 10m", "--", "x")
    assert job.code == 2 and SENTENCE in job.err, job
    assert "discord" not in hbgw("cron", "list").out


def test_a_platform_inbound_cannot_open_a_session_with_it(store: Store) -> None:
    with pytest.raises(BadInput, match=SENTENCE):
        store.sessions.session_at(platform="discord", chat=TRAVERSAL, thread=None, now=T0)


def test_a_stored_row_from_before_the_check_never_becomes_a_path(
    store: Store, fake: FakeDiscord
) -> None:
    sid = store.sessions.create_session(platform="discord", chat="3003", now=T0).id
    with store.engine.begin() as conn:  # as an old row would be: written without the check
        conn.execute(
            text("UPDATE sessions SET chat = :c WHERE id = :s"), {"c": TRAVERSAL, "s": sid}
        )
    session = store.sessions.get_session(sid)
    assert session.chat == TRAVERSAL
    channel = DiscordChannel(BOT_TOKEN, base_url=fake.api_url)
    with pytest.raises(PermanentDelivery, match="is not a snowflake"):
        channel.send(
            Address("discord", session.chat, session.thread),
            "hello",
            session_id=sid,
            kind="reply",
            delivery_key="msg:1",
        )
    assert fake.calls == []  # no request at all, so no token went anywhere
