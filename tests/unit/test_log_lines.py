"""Issue 29 (low): text a model or a user wrote cannot forge a line of the worker's output.

A model reply holding ``\\nts=… level=ERROR …`` was printed by the console channel as a line of
its own in the worker's stdout, where it read as a record of the gateway's log. Line breaks
(``\\n``, ``\\r``, U+0085, U+2028, U+2029, the form feeds and separators ``splitlines`` honours)
and other control characters are escaped in what the console channel prints and in every log
line, in both log formats; the text itself is stored as it came.
"""

from __future__ import annotations

import io
import json
import logging
import uuid

import pytest

from hbgw.core.logs import LogFormatter, Mode
from hbgw.gateway.channels.console import ConsoleChannel
from hbgw.workers.ports import Address

FORGED = "done\nts=2026-12-05T00:00:00.000Z level=ERROR logger=hbgw message=forged"
BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("brk", BREAKS)
def test_the_console_channel_prints_a_reply_on_one_line(
    capsys: pytest.CaptureFixture[str], brk: str
) -> None:
    text = FORGED.replace("\n", brk)
    ConsoleChannel().send(
        Address("cli", "me", None), text, session_id="s", kind="reply", delivery_key="msg:1"
    )
    printed = capsys.readouterr().out
    assert len(printed.splitlines()) == 1, printed
    assert "level=ERROR" in printed  # shown, escaped, on the reply's own line


def test_the_console_channel_shows_a_line_break_as_an_escape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ConsoleChannel().send(
        Address("cli", "me", None), "a\nb\u2028c", session_id="s", kind="reply", delivery_key="k"
    )
    assert capsys.readouterr().out == "[cli:me] (reply) a\\nb\\u2028c\n"


def _formatted(mode: Mode, message: str) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LogFormatter(mode))
    logger = logging.getLogger(f"hbgw.test.{uuid.uuid4().hex[:8]}")
    logger.propagate = False
    logger.addHandler(handler)
    logger.warning("reply %s", message, extra={"action": "turn.reply", "text": message})
    return stream.getvalue()


@pytest.mark.parametrize("mode", ["text", "json"])
@pytest.mark.parametrize("brk", [*BREAKS, "\x1b[31m", "\x9b31m", "\u202e", "\t"])
def test_a_log_record_stays_one_line_without_control_characters(mode: Mode, brk: str) -> None:
    out = _formatted(mode, FORGED.replace("\n", brk))
    assert len(out.splitlines()) == 1, out
    controls = [ch for ch in brk if not ch.isprintable()]
    assert not any(ch in out.rstrip("\n") for ch in controls), out
    if mode == "json":  # still valid JSON, and it decodes to the text as it came
        assert json.loads(out)["text"] == FORGED.replace("\n", brk)
