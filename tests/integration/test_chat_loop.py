"""The chat loop against the real API, fed through a pipe (the pty test drives the real command)."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from support.api_fixtures import ALICE, TOKENS, Api
from support.harness import wait_until
from support.tcp_proxy import proxy_to

from hbgw.chat.client import ApiClient, ChatMessage
from hbgw.chat.terminal import heartbeat_prompt, render, run_chat


@dataclass
class Piped:
    keyboard: io.TextIOWrapper
    screen: io.StringIO
    codes: list[int] = field(default_factory=list)

    def type(self, line: str) -> None:
        self.keyboard.write(line + "\n")
        self.keyboard.flush()

    def shows(self, text: str, timeout: float = 30.0) -> None:
        wait_until(lambda: text in self.screen.getvalue(), timeout, repr(text))


@contextmanager
def chatting(client: ApiClient, sid: str) -> Iterator[Piped]:
    read_end, write_end = os.pipe()
    with os.fdopen(read_end) as stdin, os.fdopen(write_end, "w") as keyboard:
        piped = Piped(keyboard, io.StringIO())
        loop = threading.Thread(
            target=lambda: piped.codes.append(run_chat(client, sid, stdin=stdin, out=piped.screen))
        )
        loop.start()
        try:
            piped.shows("history ends")
            yield piped
        finally:
            keyboard.close()  # end of input: what Ctrl-D is on a terminal
            loop.join(30)


def test_the_loop_sends_shows_replies_and_answers_commands(api: Api) -> None:
    with api.gw.worker("w1"), ApiClient(api.url, TOKENS[ALICE]) as client:
        sid = client.create_session("api", "t")["id"]
        with chatting(client, sid) as chat:
            chat.type("hello")
            chat.shows("agent> user reply to: hello")
            chat.type("/heartbeat every 0.5s too fast")
            chat.shows("Error: ")
            chat.type("/heartbeat every 10m check CI")
            chat.shows("♥ Heartbeat set (every 10m): check CI")
            wait_until(lambda: api.gw.rt.registry.live(api.gw.rt.now_ms()) == ["w1"], 30, "w1")
            api.gw.due_now(sid, seconds=600, prompt="check CI")
            api.gw.tick()
            chat.shows("agent ♥> heartbeat reply to: [Heartbeat")
        assert chat.codes == [0]
        shown = chat.screen.getvalue()
        assert "you> hello" not in shown  # the user's own words are not echoed back
        assert shown.rstrip().endswith("Bye.")
        # Back later: the conversation so far is the history.
        with chatting(client, sid) as again:
            pass
        history = again.screen.getvalue()
        assert "you> hello\nagent> user reply to: hello\n" in history
        assert "agent ♥> heartbeat reply to: [Heartbeat" in history


def test_an_api_error_is_shown_and_the_loop_goes_on(api: Api) -> None:
    with ApiClient(api.url, TOKENS[ALICE]) as client:
        sid = client.create_session("api", "t")["id"]
        with chatting(client, sid) as chat:
            chat.type("x" * (api.gw.settings.max_message_chars + 1))
            chat.shows("Error: ")
            chat.type("/heartbeat status")
            chat.shows("No heartbeat")
        assert chat.codes == [0]


def test_a_lost_api_is_a_sentence_and_the_chat_goes_on(api: Api) -> None:
    with (
        api.gw.worker("w1"),
        proxy_to(api.url) as proxy,
        ApiClient(proxy.url, TOKENS[ALICE]) as client,
    ):
        sid = client.create_session("api", "t")["id"]
        with chatting(client, sid) as chat:
            # One kept-alive connection for the requests so far, one for the events stream.
            wait_until(lambda: proxy.connections >= 2, 20, "the events stream")
            proxy.cut()
            chat.shows("(live replies paused) Cannot reach the API at")
            chat.shows("(live replies back)")
            proxy.swallow(2)  # the send and its one retry both lose their answer
            chat.type("lost")
            chat.shows("Error: Cannot reach the API at")
            chat.type("found")
            chat.shows("agent> user reply to: found")
        assert chat.codes == [0]
        assert chat.screen.getvalue().count("(live replies paused)") == 1


def test_a_restarted_api_is_found_again_where_hbgw_up_writes_it(api: Api) -> None:
    with api.gw.worker("w1"), proxy_to(api.url) as before, proxy_to(api.url) as after:
        now = [before.url]  # what api.json says
        with ApiClient(
            before.url, TOKENS[ALICE], rediscover=lambda: (now[0], TOKENS[ALICE])
        ) as client:
            sid = client.create_session("api", "t")["id"]
            with chatting(client, sid) as chat:
                wait_until(lambda: before.connections >= 2, 20, "the events stream")
                now[0] = after.url
                before.close()  # `hbgw up` stopped; it came back on another port
                chat.shows("(live replies back)")
                chat.type("still here")
                chat.shows("agent> user reply to: still here")
            assert chat.codes == [0] and client.url == after.url


def test_the_chat_follows_the_session_through_compression(api: Api) -> None:
    with api.gw.worker("w1"), ApiClient(api.url, TOKENS[ALICE]) as client:
        sid = client.create_session("api", "t")["id"]
        with chatting(client, sid) as chat, api.owner(ALICE) as alice:
            child = alice.post(f"/v1/sessions/{sid}/compress").json()["session"]["id"]
            chat.shows(f"Session compressed: it continues as {child}")
            chat.type("after")
            chat.shows("agent> user reply to: after")
        assert [m.text for m in client.history(child)][:1] == ["after"]
        with chatting(client, sid) as again:  # the old id leads to the child
            pass
        assert f"Session {sid} continues as {child} (compressed)." in again.screen.getvalue()


def test_how_messages_are_shown() -> None:
    def message(role: str, kind: str, text: str, heartbeat: bool = False) -> ChatMessage:
        return ChatMessage(1, "s", role, kind, text, heartbeat)

    assert render(message("user", "user", "hi"), live=True) is None
    assert render(message("user", "user", "hi\nthere"), live=False) == "you> hi\n     there"
    beat = "[Heartbeat — recurring instruction, fires every 2s]\nsay hi\n\nIf nothing …"
    assert render(message("user", "heartbeat", beat, True), live=True) == "♥ heartbeat: say hi"
    assert render(message("assistant", "assistant", "ok", True), live=True) == "agent ♥> ok"
    assert render(message("assistant", "assistant", "\x1b[31mred"), live=True) == (
        "agent> \\x1b[31mred"
    )
    assert render(message("system", "notice", "note"), live=True) == "notice: note"
    silent = ChatMessage(2, "s", "assistant", "assistant", "[SILENT]", True, silent=True)
    assert render(silent, live=False) is None  # the chat never received it
    assert heartbeat_prompt("just text") == "just text"
