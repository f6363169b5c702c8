"""`hbgw chat` says "Ctrl-D (or Ctrl-C) leaves": true even when it was started with SIGINT
ignored. A shell without job control (``cmd &`` in a script, a CI runner started that way)
hands its background children SIGINT ignored; Python then installs no handler, and the chat
ignored Ctrl-C for good (the gate's terminal test failed that way three times)."""

from __future__ import annotations

import signal

from hbgw.chat.terminal import _ctrl_c_leaves


def test_an_ignored_sigint_becomes_keyboard_interrupt_again() -> None:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _ctrl_c_leaves()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_handler_someone_installed_is_left_alone() -> None:
    def mine(_signum: int, _frame: object) -> None: ...

    before = signal.signal(signal.SIGINT, mine)
    try:
        _ctrl_c_leaves()
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, before)
