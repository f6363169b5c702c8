"""`hbgw chat` as a new user meets it: `hbgw up` in one terminal, `hbgw chat` in another."""

from __future__ import annotations

import re
import sys
from contextlib import ExitStack
from pathlib import Path

from support.pty_term import CTRL_C, CTRL_D, in_terminal
from support.up_process import hbgw_up


def test_chat_talks_sets_a_heartbeat_and_sees_it_arrive(tmp_path: Path) -> None:
    # A heartbeat every 2 s needs the minimum lowered; everything else is `hbgw up`'s default.
    with hbgw_up(tmp_path, HBGW_MIN_INTERVAL="1"):
        # No flags, and nothing in the environment but where `hbgw up` keeps its files.
        chat = [sys.executable, "-m", "hbgw", "chat"]
        with in_terminal(chat, env={"HBGW_HOME": str(tmp_path)}) as term:
            banner = term.expect("history ends")
            assert "New session " in banner and "Ctrl-D" in banner
            term.expect("you> ")
            term.type("hello there\n")
            term.expect("agent> echo: hello there", timeout=30)
            term.type("/heartbeat every 2s say hi\n")
            term.expect("♥ Heartbeat set (every 2s): say hi")
            term.expect("agent ♥> echo: [Heartbeat", timeout=30)
            term.type(CTRL_D)
            term.expect("Bye.")
            assert term.wait() == 0
            assert "Traceback" not in term.seen
        sid = re.findall(r"New session (\S+) ", term.seen)[0]
        # Back later by id: the history shows the conversation, heartbeats marked; Ctrl-C leaves.
        with in_terminal([*chat, sid], env={"HBGW_HOME": str(tmp_path)}) as term:
            history = term.expect("history ends")
            assert "you> hello there" in history and "agent> echo: hello there" in history
            assert "♥ heartbeat: say hi" in history and "agent ♥> echo: [Heartbeat" in history
            term.expect("you> ")
            term.type(CTRL_C)
            term.expect("Bye.")
            assert term.wait() == 0


def test_chat_rides_out_a_restart_of_hbgw_up(tmp_path: Path) -> None:
    chat = [sys.executable, "-m", "hbgw", "chat"]
    with ExitStack() as outlives_up:
        with hbgw_up(tmp_path) as before:
            term = outlives_up.enter_context(in_terminal(chat, env={"HBGW_HOME": str(tmp_path)}))
            term.expect("history ends")
            term.type("before\n")
            term.expect("agent> echo: before", timeout=30)
        term.expect("(live replies paused)")
        # Back with a fresh token (and another port when the old one is still taken).
        with hbgw_up(tmp_path) as after:
            assert after["token"] != before["token"]
            term.expect("(live replies back)", timeout=30)
            term.type("after\n")
            term.expect("agent> echo: after", timeout=30)
            term.type(CTRL_D)
            assert term.wait() == 0
