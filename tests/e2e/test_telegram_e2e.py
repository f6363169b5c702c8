"""Telegram end to end, real workers and the fake Bot API: a heartbeat set by a verified webhook
update in a forum topic (``/heartbeat@bot``), delivered by a worker into that topic
(``message_thread_id``), with no typing while it runs; a user message answered in its topic
after one ``sendChatAction``; a repeated update stored once; 429 waited out; a 403 fails the
turn with a permanent reason."""

from __future__ import annotations

from support.fake_telegram import BLOCKED, TOKEN, USERNAME, Failure
from support.harness import wait_until
from support.telegram_fixtures import GROUP, TOPIC, Telegram, message_update


def live(telegram: Telegram) -> None:
    rt = telegram.gw.rt
    wait_until(lambda: rt.registry.live(rt.now_ms()) == ["w1"], 30, "w1 live")


def set_heartbeat(telegram: Telegram, update_id: int = 1) -> str:
    """``/heartbeat@bot every 1m …`` in the topic, as Telegram's command menu sends it; the
    answer arrives in the topic. The topic's session."""
    fake = telegram.fake
    said = message_update(update_id, f"/heartbeat@{USERNAME} every 1m summarize the topic")
    answer = telegram.update(said)
    assert answer.status_code == 200 and answer.json() == {"ok": True}
    [notice] = wait_until(lambda: fake.sends(message_thread_id=TOPIC), 30, "the answer")
    assert notice.params["text"].startswith("♥ Heartbeat set (every 1m")
    assert notice.params["chat_id"] == str(GROUP)
    return telegram.session()


def test_a_heartbeat_set_in_a_topic_arrives_in_that_topic_and_quietly(telegram: Telegram) -> None:
    fake, gw = telegram.fake, telegram.gw
    with gw.worker("w1"):
        live(telegram)
        sid = set_heartbeat(telegram)
        status = gw.store.heartbeats.heartbeat_status(sid, gw.rt.clock()).to_json()
        assert status["prompt"] == "summarize the topic"
        before = len(fake.calls)
        gw.tick()  # set a minute ago by the API's clock: due now
        [run] = gw.final_runs(sid)
        assert run.state == "completed"
        # The heartbeat turn: one sendMessage into the topic, and nothing typing-like.
        during = fake.calls[before:]
        assert [c.method for c in during] == ["sendMessage"]
        beat = during[0].params
        assert beat["chat_id"] == str(GROUP) and beat["message_thread_id"] == TOPIC
        assert beat["text"].startswith("heartbeat reply to")
        assert "reply_to_message_id" not in beat and "reply_parameters" not in beat

        # A user message in the topic: typing first, then the reply, both into the topic.
        before = len(fake.calls)
        assert telegram.update(message_update(2, "how is the deploy?")).status_code == 200
        wait_until(lambda: fake.sends(text="user reply to: how is the deploy?"), 30, "reply")
        during = fake.calls[before:]
        assert [c.method for c in during] == ["sendChatAction", "sendMessage"]
        typing = during[0].params
        assert typing == {"chat_id": str(GROUP), "message_thread_id": TOPIC, "action": "typing"}
        assert during[1].params["message_thread_id"] == TOPIC
    assert {c.token for c in fake.calls} == {TOKEN}
    assert [c.method for c in fake.calls].count("getMe") == 1  # the @name, asked once


def test_topics_and_chats_are_sessions_of_their_own(telegram: Telegram) -> None:
    fake = telegram.fake
    assert telegram.update(message_update(10, "/hb every 1m in the topic")).status_code == 200
    general = message_update(11, "/hb every 1m in general", topic=None)
    assert telegram.update(general).status_code == 200
    # A reply thread of a group that is no forum is the group's conversation.
    reply = message_update(12, "/hb status", chat=-1009, topic=77, forum=False)
    assert telegram.update(reply).status_code == 200
    wait_until(lambda: len(fake.sends()) == 3, 30, "three answers")
    assert telegram.session() != telegram.session(topic=None)
    assert telegram.session(chat=-1009, topic=None)
    by_chat = {(c.params["chat_id"], c.params.get("message_thread_id")) for c in fake.sends()}
    assert by_chat == {(str(GROUP), TOPIC), (str(GROUP), None), ("-1009", None)}
    # Another bot's command is not ours: nothing is answered or stored for it.
    other = message_update(13, "/heartbeat@someone_else_bot every 1m no", topic=None)
    assert telegram.update(other).status_code == 200
    assert len(fake.sends()) == 3


def test_a_repeated_update_is_stored_once(telegram: Telegram) -> None:
    said = message_update(20, "hello there", message_id=555)
    assert telegram.update(said).status_code == 200
    assert telegram.update(said).status_code == 200  # Telegram's retry: the same update_id
    again = dict(said, update_id=21)  # the same message under another update id
    assert telegram.update(again).status_code == 200
    texts = [m.text for m in telegram.gw.store.messages.list_messages(telegram.session(), limit=10)]
    assert texts == ["hello there"]


def test_a_429_is_waited_out_then_the_reply_is_sent(telegram: Telegram) -> None:
    fake, gw = telegram.fake, telegram.gw
    fake.fail_next("sendMessage", Failure(429, "Too Many Requests: retry after 1", retry_after=1))
    with gw.worker("w1"):
        live(telegram)
        assert telegram.update(message_update(30, "are you there?")).status_code == 200
        wait_until(lambda: fake.sends(text="user reply to: are you there?"), 30, "the reply")
    sends = fake.of("sendMessage")
    assert [c.status for c in sends] == [429, 200]
    assert sends[1].at - sends[0].at >= 0.95  # after the second Telegram asked for
    assert sends[1].params["message_thread_id"] == TOPIC


def test_a_blocked_bot_fails_the_heartbeat_turn_for_good(telegram: Telegram) -> None:
    fake, gw = telegram.fake, telegram.gw
    with gw.worker("w1"):
        live(telegram)
        sid = set_heartbeat(telegram, update_id=40)
        fake.fail_next("sendMessage", BLOCKED)
        gw.tick()
        [run] = gw.final_runs(sid)
    assert run.state == "failed"
    assert "Telegram refused the message for good (Forbidden: bot was blocked" in run.detail
    assert [c.status for c in fake.of("sendMessage")] == [200, 403]  # the answer, then no retry
