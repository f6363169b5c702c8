"""Discord end to end, real workers and the fake Discord REST API: a heartbeat set by a signed
``/heartbeat`` interaction in a thread, answered through its deferred response, delivered by a
worker into that thread, with no typing while it runs; an ``/ask`` answered in the thread with
typing first; PING answered; a repeated interaction stored once; a 429 waited out."""

from __future__ import annotations

from support.discord_fixtures import APP_ID, BOT_TOKEN, CHANNEL, GUILD, THREAD, Discord, interaction
from support.fake_discord import Failure
from support.harness import wait_until

from hbgw.core.clock import utcnow

DEFERRED_EPHEMERAL = {"type": 5, "data": {"flags": 64}}


def live(discord: Discord) -> None:
    rt = discord.gw.rt
    wait_until(lambda: rt.registry.live(rt.now_ms()) == ["w1"], 30, "w1 live")


def test_a_heartbeat_set_in_a_thread_arrives_in_the_thread_and_quietly(discord: Discord) -> None:
    fake, gw = discord.fake, discord.gw
    with gw.worker("w1"):
        live(discord)
        command = interaction("heartbeat", "every 1m summarize the thread", thread=True)
        answer = discord.send(command)
        assert answer.status_code == 200, answer.text
        assert answer.json() == DEFERRED_EPHEMERAL
        # The command's sentence replaces "thinking…": the interaction's own webhook, no bot token.
        [edit] = wait_until(lambda: fake.of("edit"), 30, "the deferred answer")
        assert edit.ids == {"app": APP_ID, "token": command["token"]}
        assert edit.content.startswith("♥ Heartbeat set (every 1m") and edit.auth == ""
        assert edit.body["allowed_mentions"] == {"parse": []}
        sid = discord.session(thread=True)
        session = gw.store.sessions.get_session(sid)
        assert (session.chat, session.thread, session.owner) == (
            CHANNEL,
            THREAD,
            f"discord:{GUILD}",
        )

        before = len(fake.calls)
        gw.tick()  # set a minute ago by the API's clock: due now
        gw.final_runs(sid)
        during = fake.calls[before:]
        # Nothing typing-like while the heartbeat turn ran: one message, in the thread.
        assert [c.kind for c in during] == ["message"], during
        [beat] = during
        assert beat.channel == THREAD and beat.content.startswith("heartbeat reply to")
        assert beat.body["allowed_mentions"] == {"parse": []}
        assert beat.auth == f"Bot {BOT_TOKEN}" and beat.agent.startswith("DiscordBot (")

        # A user message through /ask in the thread: typing first, then the reply, both there.
        asked = discord.send(interaction("ask", "how is the deploy?", thread=True))
        assert asked.json()["type"] == 4
        assert asked.json()["data"]["content"] == ">>> how is the deploy?"
        reply = wait_until(
            lambda: fake.messages(content="user reply to: how is the deploy?"), 30, "the reply"
        )
        assert reply[0].channel == THREAD
        typing = fake.of("typing")
        assert [t.channel for t in typing] == [THREAD] and typing[0].at <= reply[0].at
        assert [r.state for r in gw.runs(sid)] == ["completed"]
        assert not [c for c in fake.calls if c.kind == "other"]


def test_ping_is_answered_with_pong(discord: Discord) -> None:
    answer = discord.send({"id": "1", "application_id": APP_ID, "type": 1, "token": "t"})
    assert answer.status_code == 200 and answer.json() == {"type": 1}
    assert discord.fake.calls == []


def test_a_repeated_interaction_is_stored_once(discord: Discord) -> None:
    asked = interaction("ask", "hello there")
    first = discord.send(asked)
    assert first.json()["data"]["content"] == ">>> hello there"
    again = discord.send(asked)
    assert again.status_code == 200 and again.json() == DEFERRED_EPHEMERAL
    sid = discord.session(thread=False)
    assert [m.text for m in discord.gw.store.messages.list_messages(sid, limit=10)] == [
        "hello there"
    ]
    # The message command on one message: asked twice (two interactions), stored once.
    target = {"id": "8008", "content": "why did CI fail?", "channel_id": CHANNEL}
    for _ in range(2):
        menu = interaction(
            "Ask the agent", type=3, target_id="8008", resolved={"messages": {"8008": target}}
        )
        assert discord.send(menu).json()["data"]["content"] == ">>> why did CI fail?"
    texts = [m.text for m in discord.gw.store.messages.list_messages(sid, limit=10)]
    assert texts == ["hello there", "why did CI fail?"]


def test_a_429_is_waited_out_then_the_reply_is_posted(discord: Discord) -> None:
    fake, gw = discord.fake, discord.gw
    fake.fail_next("message", Failure(429, retry_after=0.3))
    with gw.worker("w1"):
        live(discord)
        assert discord.send(interaction("ask", "are you there?")).status_code == 200
        wait_until(lambda: fake.messages(content="user reply to: are you there?"), 30, "reply")
    posts = fake.of("message")
    assert [c.status for c in posts] == [429, 200]
    assert posts[1].at - posts[0].at >= 0.3  # the retry came after Discord's retry_after
    assert posts[0].body["nonce"] == posts[1].body["nonce"]  # the same message, again
    assert posts[1].channel == CHANNEL


def test_a_heartbeat_command_error_is_its_answer(discord: Discord) -> None:
    discord.send(interaction("hb", "cron 61 * * * * too late"))
    [edit] = wait_until(lambda: discord.fake.of("edit"), 30, "the deferred answer")
    assert "61" in edit.content and not edit.content.startswith("♥"), edit.content
    status = discord.send(interaction("hb", "status"))
    assert status.json() == DEFERRED_EPHEMERAL
    edits = wait_until(lambda: discord.fake.of("edit")[1:], 30, "the status answer")
    assert "heartbeat" in edits[0].content.lower()
    sid = discord.session(thread=False)
    assert discord.gw.store.heartbeats.heartbeat_status(sid, utcnow()).to_json()["prompt"] is None


def test_a_403_fails_the_heartbeat_delivery_permanently_with_its_reason(discord: Discord) -> None:
    fake, gw = discord.fake, discord.gw
    fake.fail_next("message", Failure(403, code=50013))
    with gw.worker("w1"):
        live(discord)
        discord.send(interaction("heartbeat", "every 1m check the deploy", thread=True))
        wait_until(lambda: fake.of("edit"), 30, "the deferred answer")
        sid = discord.session(thread=True)
        gw.tick()
        [run] = gw.final_runs(sid)
    assert run.state == "failed"
    assert "Discord refused the message for good (Missing Permissions" in (run.detail or "")
    [refused] = fake.of("message")
    assert refused.status == 403 and refused.channel == THREAD  # tried once, in the thread only
