"""`hbgw watch SESSION` (issue 20, item 5): a CLI session's replies and heartbeat turns reach a
screen, marked by kind, through the real API's events stream and a real worker."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

from support.api_fixtures import ALICE, TOKENS, Api
from support.cli_fixtures import Hbgw
from support.harness import wait_until

from hbgw.chat.client import ApiClient
from hbgw.chat.watch import run_watch


def _up_file(tmp_path: Path, api: Api) -> None:
    """What `hbgw up` writes while it runs."""
    (tmp_path / "api.json").write_text(
        json.dumps({"url": api.url, "token": TOKENS[ALICE], "owner": ALICE})
    )


def test_watch_shows_replies_and_heartbeat_turns_of_a_cli_session(
    hbgw: Hbgw, api: Api, tmp_path: Path
) -> None:
    _up_file(tmp_path, api)
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    screen, stop, codes = io.StringIO(), threading.Event(), []
    with api.gw.worker("w1"), ApiClient(api.url, TOKENS[ALICE]) as client:
        watching = threading.Thread(
            target=lambda: codes.append(run_watch(client, sid, out=screen, stop=stop))
        )
        watching.start()
        try:
            wait_until(lambda: "Watching session" in screen.getvalue(), 20, "the banner")
            client.send(sid, "hello")
            wait_until(lambda: "agent> user reply to: hello" in screen.getvalue(), 30, "reply")
            wait_until(lambda: api.gw.rt.registry.live(api.gw.rt.now_ms()) == ["w1"], 30, "w1")
            api.gw.due_now(sid, seconds=600, prompt="check CI")
            api.gw.tick()
            wait_until(
                lambda: "agent ♥> heartbeat reply to: [Heartbeat" in screen.getvalue(), 30, "♥"
            )
        finally:
            stop.set()
            client.send(sid, "wake the stream so it sees the stop")
            watching.join(30)
    assert codes == [0]
    assert "you> hello" not in screen.getvalue()  # deliveries only, not the user's words


def test_watch_an_unknown_session_is_a_sentence_and_exit_2(
    hbgw: Hbgw, api: Api, tmp_path: Path
) -> None:
    _up_file(tmp_path, api)
    result = hbgw("watch", "nope")
    assert result.code == 2, result
    assert result.err.startswith("Error: ") and "Traceback" not in result.err
