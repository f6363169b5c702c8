"""Slack end to end, real workers and the fake Slack Web API: a heartbeat set by the signed
``/hbgw`` slash command and by a signed thread message, delivered by a worker where it was set
(the channel, or the thread's ``thread_ts``), quiet while it runs; a user message answered in its
thread; retries stored once; 429 waited out; a platform not served refused."""

from __future__ import annotations

from support.fake_slack import Failure
from support.harness import wait_until
from support.slack_fixtures import BOT, CHANNEL, TEAM, Slack, message

from hbgw.core.clock import utcnow

ROOT = "1700000000.000100"  # a thread's first message (Alice's, not addressed to the app)


def live(slack: Slack) -> None:
    rt = slack.gw.rt
    wait_until(lambda: rt.registry.live(rt.now_ms()) == ["w1"], 30, "w1 live")


def thread_session(slack: Slack, thread: str = ROOT) -> str:
    session = slack.gw.store.sessions.session_at(
        platform="slack",
        chat=CHANNEL,
        thread=thread,
        now=utcnow(),
        owner=f"slack:{TEAM}",
        create=False,
    )
    assert session is not None
    return session.id


def _set_both_heartbeats(slack: Slack) -> tuple[str, str]:
    """The channel's heartbeat by slash command, the thread's by a mention in it; their
    sessions (thread, channel)."""
    fake = slack.fake
    # The slash command speaks for the channel: answered in its response, to its author.
    answer = slack.command("heartbeat every 1m check the deploy")
    assert answer.status_code == 200, answer.text
    assert answer.json()["response_type"] == "ephemeral"
    assert answer.json()["text"].startswith("♥ Heartbeat set (every 1m")
    # A message in a thread that mentions the app sets the thread's own heartbeat; the
    # answer is posted into the thread.
    assert slack.event("Ev0", message("lunch?", ROOT)).status_code == 200  # not for us
    said = message(
        f"<@{BOT}> heartbeat every 1m summarize the thread", "1700000000.000200", thread_ts=ROOT
    )
    assert slack.event("Ev1", said).json() == {"ok": True}
    wait_until(lambda: fake.posts(thread_ts=ROOT), 30, "the command's answer in the thread")
    assert fake.posts(thread_ts=ROOT)[0].params["text"].startswith("♥ Heartbeat set")
    channel = slack.gw.store.sessions.session_at(
        platform="slack", chat=CHANNEL, thread=None, now=utcnow(), owner=f"slack:{TEAM}",
        create=False,
    )  # fmt: skip
    assert channel is not None
    return thread_session(slack), channel.id


def test_heartbeats_set_in_slack_arrive_where_they_were_set_and_quietly(slack: Slack) -> None:
    fake, gw = slack.fake, slack.gw
    with gw.worker("w1"):
        live(slack)
        sid, channel_sid = _set_both_heartbeats(slack)
        before = len(fake.calls)
        gw.tick()  # both were set a minute ago by the API's clock: due now
        gw.final_runs(sid)
        gw.final_runs(channel_sid)
        beats = [c for c in fake.posts() if c.params["text"].startswith("heartbeat reply to")]
        assert {c.params.get("thread_ts") for c in beats} == {ROOT, None}
        assert {c.params["channel"] for c in beats} == {CHANNEL}
        # Each heartbeat is its own session's: the thread's prompt and the channel's.
        prompts = {
            s: gw.store.heartbeats.heartbeat_status(s, utcnow()).to_json()["prompt"]
            for s in (sid, channel_sid)
        }
        assert prompts == {sid: "summarize the thread", channel_sid: "check the deploy"}
        # Nothing typing-like while the heartbeat turns ran: two posts, nothing else.
        during = fake.calls[before:]
        assert [c.method for c in during] == ["chat.postMessage", "chat.postMessage"]
        assert not any("reply_broadcast" in c.params for c in fake.calls)
        assert all(c.token == "xoxb-17-fake-bot-token" for c in fake.calls)

        # A user message in the thread (no mention needed: the thread is a session).
        asked = message("how is the deploy?", "1700000000.000300", thread_ts=ROOT)
        assert slack.event("Ev2", asked).status_code == 200
        reply = wait_until(
            lambda: fake.posts(text="user reply to: how is the deploy?"), 30, "the reply"
        )
        assert reply[0].params["thread_ts"] == ROOT and reply[0].params["channel"] == CHANNEL
        assert [r.state for r in gw.runs(sid)] == ["completed"]


def test_a_retried_event_is_stored_once(slack: Slack) -> None:
    said = message(f"<@{BOT}> hello there", "1700000000.000400")
    assert slack.event("Ev9", said).json() == {"ok": True}
    retry = slack.event(
        "Ev9", said, headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "timeout"}
    )
    assert retry.status_code == 200 and retry.json()["duplicate"] is True
    # The same message under another event id (Slack can send one twice): its ts is its key.
    assert slack.event("Ev10", said).status_code == 200
    sid = thread_session(slack, "1700000000.000400")
    texts = [m.text for m in slack.gw.store.messages.list_messages(sid, limit=10)]
    assert texts == ["hello there"]


def test_a_429_is_waited_out_then_the_reply_is_posted(slack: Slack) -> None:
    fake, gw = slack.fake, slack.gw
    fake.fail_next("chat.postMessage", Failure(429, retry_after=1))
    with gw.worker("w1"):
        live(slack)
        said = message(f"<@{BOT}> are you there?", "1700000000.000500")
        assert slack.event("Ev20", said).status_code == 200
        wait_until(lambda: fake.posts(text="user reply to: are you there?"), 30, "the reply")
    posts = fake.of("chat.postMessage")
    assert [c.status for c in posts] == [429, 200]
    assert posts[1].at >= posts[0].at  # the retry came after the refusal
    assert posts[1].params["thread_ts"] == "1700000000.000500"


def test_a_session_on_a_platform_not_served_is_refused(slack: Slack) -> None:
    admin = {"Authorization": "Bearer tok-admin-c0ffee"}
    with slack.client() as client:
        created = client.post(
            "/v1/sessions", json={"platform": "telegram", "chat": "42"}, headers=admin
        )
    assert created.status_code == 422
    sentence = (
        "Platform telegram is not enabled here (HBGW_PLATFORMS is cli, slack); its sessions "
        "take no messages and get no deliveries."
    )
    assert created.json()["error"]["message"] == sentence
    # One made before the deployment stopped serving it: its message and its turn are refused.
    gw = slack.gw
    sid = gw.store.sessions.create_session(platform="telegram", chat="42", now=utcnow()).id
    with slack.client() as client:
        sent = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hi"}, headers=admin)
    assert sent.status_code == 422 and sent.json()["error"]["message"] == sentence
    assert gw.store.messages.list_messages(sid, limit=10) == []
    with gw.worker("w1"):
        live(slack)
        gw.due_now(sid)
        gw.tick()
        [run] = gw.final_runs(sid)
    assert run.state == "failed" and run.detail == f"delivery failed: {sentence}"
    assert slack.fake.of("chat.postMessage") == []
