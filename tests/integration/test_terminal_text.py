"""Text printed on a terminal: escape codes in prompts and replies are shown, never obeyed."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli_fixtures import Hbgw

from hbgw.core.terminal import inert
from hbgw.gateway.channels.console import ConsoleChannel
from hbgw.sessions.store import Store
from hbgw.workers.ports import Address

RED = "\x1b[31mred\x1b[0m"
TITLE = "\x1b]0;pwned\x07"  # OSC: sets the terminal window title
LINK = "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text, two\nlines\tand a tab", "plain text, two\nlines\tand a tab"),
        (RED, "\\x1b[31mred\\x1b[0m"),
        (TITLE, "\\x1b]0;pwned\\x07"),
        ("over\rwrite", "over\\x0dwrite"),
        ("c1 \x9b31m csi", "c1 \\x9b31m csi"),
        ("del \x7f", "del \\x7f"),
        ("bidi \u202eevil", "bidi \\u202eevil"),
        ("♥ ünïcode stays", "♥ ünïcode stays"),
    ],
)
def test_inert_shows_control_characters(raw: str, shown: str) -> None:
    assert inert(raw) == shown


def test_console_channel_prints_escapes_inert(capsys: pytest.CaptureFixture[str]) -> None:
    ConsoleChannel().send(
        Address("cli", f"chat{TITLE}", None),
        f"reply {RED}",
        session_id="s",
        kind="reply",
        delivery_key="msg:1",
    )
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\x07" not in printed
    assert printed == "[cli:chat\\x1b]0;pwned\\x07] (reply) reply \\x1b[31mred\\x1b[0m\n"


def test_cli_output_is_inert_and_the_store_keeps_the_text(hbgw: Hbgw, tmp_path: Path) -> None:
    # Control characters in a chat name are refused at the edge (bad input), so only the prompt
    # carries escapes here.
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    prompt = f"check {RED} {LINK}"
    outputs = [
        hbgw("send", sid, f"/heartbeat every 10m {prompt}").out,
        hbgw("heartbeat", "status", sid).out,
        hbgw("send", sid, "/heartbeat status").out,
        hbgw("session", "show", sid).out,
        hbgw("runs", sid).out,
    ]
    for printed in outputs:
        assert "\x1b" not in printed and "\x07" not in printed, printed
    assert "check \\x1b[31mred\\x1b[0m" in outputs[1]
    store = Store.from_url(f"sqlite:///{tmp_path / 'hbgw.sqlite3'}")
    try:
        state = store.heartbeats.get_heartbeat(sid)
        assert state is not None and state.prompt == prompt
        assert store.sessions.get_session(sid).chat == "me"
    finally:
        store.close()


def test_error_sentences_are_inert(hbgw: Hbgw) -> None:
    result = hbgw("heartbeat", "status", f"nope{RED}")
    assert result.code == 2
    assert "\x1b" not in result.err and "nope\\x1b[31m" in result.err
