"""The `hbgw chat` API client against the real HTTP API on loopback, real workers, real Redis."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from support.api_fixtures import ALICE, BOB, TOKENS, Api
from support.harness import wait_until
from support.tcp_proxy import proxy_to

from hbgw.chat.client import (
    ApiClient,
    ApiError,
    ApiUnreachable,
    ChatMessage,
    CommandReply,
    MessageAccepted,
)
from hbgw.chat.events import Backoff, EventStream, Moved


class Follower:
    """An EventStream consumed in a thread; tests poll what it collected."""

    def __init__(self, stream: EventStream) -> None:
        self.stream = stream
        self.items: list[ChatMessage | Moved] = []
        self.problems: list[str] = []
        self.error: Exception | None = None
        self.connected = 0
        stream.on_problem = lambda sentence, _delay: self.problems.append(sentence)
        stream.on_connect = self._connected

    def _connected(self) -> None:
        self.connected += 1

    def run(self) -> None:
        try:
            for item in self.stream:
                self.items.append(item)
        except Exception as exc:
            self.error = exc

    def replies(self) -> list[str]:
        return [m.text for m in self.items if isinstance(m, ChatMessage)]


@contextmanager
def following(client: ApiClient, sid: str) -> Iterator[Follower]:
    stream = EventStream(client, sid, backoff=Backoff(first=0.05, cap=0.2))
    follower = Follower(stream)
    thread = threading.Thread(target=follower.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: follower.connected or follower.error, 20, "the stream to open")
        yield follower
    finally:
        stream.close()
        thread.join(30)
        assert not thread.is_alive()


def alice(api: Api, url: str | None = None) -> ApiClient:
    return ApiClient(url or api.url, TOKENS[ALICE])


def test_sessions_messages_and_commands(api: Api) -> None:
    with alice(api) as client:
        session = client.create_session("api", "terminal-me")
        sid = session["id"]
        assert client.get_session(sid)["active_id"] == sid
        accepted = client.send(sid, "hello", key="k-1")
        assert isinstance(accepted, MessageAccepted) and not accepted.duplicate
        again = client.send(sid, "hello", key="k-1")
        assert isinstance(again, MessageAccepted)
        assert (again.message_id, again.duplicate) == (accepted.message_id, True)
        reply = client.send(sid, "/heartbeat every 10m check CI")
        assert reply == CommandReply(sid, True, "♥ Heartbeat set (every 10m): check CI")
        refused = client.send(sid, "/heartbeat every 1ms check")
        assert isinstance(refused, CommandReply) and not refused.ok
        assert refused.reply.endswith(".") and "\n" not in refused.reply
        assert [m.text for m in client.history(sid)] == ["hello"]


def test_history_keeps_the_newest_messages_across_pages(api: Api) -> None:
    with alice(api) as client:
        sid = client.create_session("api", "t")["id"]
        for n in range(7):
            client.send(sid, f"m{n}")
        assert [m.text for m in client.history(sid, last=3, page=2)] == ["m4", "m5", "m6"]
        assert len(client.history(sid, last=20, page=2)) == 7


def test_errors_are_typed_sentences(api: Api) -> None:
    with alice(api) as client, ApiClient(api.url, TOKENS[BOB]) as bob:
        sid = client.create_session("api", "t")["id"]
        with pytest.raises(ApiError) as unknown:
            bob.get_session(sid)
        assert (unknown.value.status, unknown.value.code, unknown.value.exit_code) == (
            404,
            "not_found",
            2,
        )
        with ApiClient(api.url, "not-a-token") as stranger, pytest.raises(ApiError) as refused:
            stranger.send(sid, "hi")
        assert refused.value.code == "unauthorized" and str(refused.value).endswith(".")
        with pytest.raises(ApiError) as too_long:
            client.send(sid, "x" * (api.gw.settings.max_message_chars + 1))
        assert too_long.value.code == "invalid_input"


def test_a_refused_token_is_looked_up_again_once(api: Api) -> None:
    fresh = (api.url, TOKENS[ALICE])
    with ApiClient(api.url, "from-before-a-restart", rediscover=lambda: fresh) as client:
        sid = client.create_session("api", "t")["id"]
        assert client.token == TOKENS[ALICE]
        assert client.get_session(sid)["id"] == sid
    with ApiClient(api.url, "wrong", rediscover=lambda: None) as client:
        with pytest.raises(ApiError) as refused:
            client.create_session("api", "t")
        assert refused.value.code == "unauthorized"


def test_an_unreachable_api_is_a_sentence(api: Api) -> None:
    with proxy_to(api.url) as proxy:
        url = proxy.url
    with ApiClient(url, "t", timeout=2) as client, pytest.raises(ApiUnreachable) as gone:
        client.get_session("s1")
    assert str(gone.value).startswith(f"Cannot reach the API at {url} (")


def test_a_send_whose_answer_is_lost_is_retried_once_with_the_same_key(api: Api) -> None:
    with alice(api) as direct, proxy_to(api.url) as proxy, alice(api, proxy.url) as client:
        sid = direct.create_session("api", "t")["id"]
        proxy.swallow(1)  # the POST reaches the API, its answer never comes back
        accepted = client.send(sid, "only once")
        assert isinstance(accepted, MessageAccepted) and accepted.duplicate
        assert [m.text for m in direct.history(sid)] == ["only once"]
        proxy.swallow(2)  # the retry is lost too: the user is told, the message is stored once
        with pytest.raises(ApiUnreachable):
            client.send(sid, "maybe")
        assert [m.text for m in direct.history(sid)] == ["only once", "maybe"]


def test_the_stream_brings_replies_and_heartbeat_turns(api: Api) -> None:
    with api.gw.worker("w1"), alice(api) as client:
        sid = client.create_session("api", "t")["id"]
        with following(client, sid) as follower:
            client.send(sid, "hello")
            wait_until(lambda: follower.replies() == ["user reply to: hello"], 30, "the reply")
            wait_until(lambda: api.gw.rt.registry.live(api.gw.rt.now_ms()) == ["w1"], 30, "w1")
            api.gw.due_now(sid, prompt="look around")
            api.gw.tick()
            wait_until(lambda: len(follower.replies()) == 2, 30, "the heartbeat turn")
        first, beat = follower.items
        assert isinstance(first, ChatMessage) and not first.heartbeat
        assert isinstance(beat, ChatMessage) and beat.heartbeat and beat.role == "assistant"
        assert beat.text.startswith("heartbeat reply to: [Heartbeat")


def test_a_dropped_stream_resumes_after_the_last_event(api: Api) -> None:
    with api.gw.worker("w1"), alice(api) as direct, proxy_to(api.url) as proxy:
        sid = direct.create_session("api", "t")["id"]
        with alice(api, proxy.url) as client, following(client, sid) as follower:
            direct.send(sid, "one")
            wait_until(lambda: follower.replies() == ["user reply to: one"], 30, "reply one")
            proxy.cut()
            wait_until(lambda: follower.problems, 20, "the drop to be noticed")
            direct.send(sid, "two")
            wait_until(lambda: len(follower.replies()) == 2, 30, "reply two")
            assert follower.replies() == ["user reply to: one", "user reply to: two"]
            assert follower.connected >= 2
        assert follower.problems[0].endswith("; retrying in 0.05 s.")


def test_the_stream_follows_compression(api: Api) -> None:
    with api.gw.worker("w1"), alice(api) as client:
        sid = client.create_session("api", "t")["id"]
        with following(client, sid) as follower:
            child = httpx.post(
                f"{api.url}/v1/sessions/{sid}/compress",
                headers={"Authorization": f"Bearer {TOKENS[ALICE]}"},
            ).json()["session"]["id"]
            wait_until(lambda: Moved(child) in follower.items, 20, "the move")
            assert follower.stream.session_id == child
            client.send(child, "after")
            wait_until(lambda: follower.replies() == ["user reply to: after"], 30, "the reply")


def test_a_stream_of_an_unknown_session_ends_with_the_error(api: Api) -> None:
    with ApiClient(api.url, TOKENS[BOB]) as bob, alice(api) as client:
        sid = client.create_session("api", "t")["id"]
        stream = EventStream(bob, sid)
        with pytest.raises(ApiError) as ended:
            next(iter(stream))
        assert ended.value.code == "not_found"
