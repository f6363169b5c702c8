"""Issue 15, hole 5: `hbgw send` tells a late reply and a failed turn from a failed send.

Late (no reply within --timeout): exit 4 and a sentence that the message is queued and will be
answered. A failed turn (``⚠ The turn failed: …``): its notice, and exit 5. Real Redis, a real
Celery worker and the command agent.
"""

from __future__ import annotations

import pytest
from support.cli_fixtures import Hbgw
from support.harness import Gateway

from hbgw.sessions.states import MessageState

LATE = 4
FAILED_TURN = 5


@pytest.fixture
def cli(hbgw: Hbgw, gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> Hbgw:
    """`hbgw` configured like the gateway's processes."""
    for name, value in gateway.env().items():
        monkeypatch.setenv(name, value)
    return hbgw


def test_no_reply_within_the_timeout_is_exit_4_and_says_it_will_be_answered(
    cli: Hbgw, gateway: Gateway
) -> None:
    sid = gateway.session()  # no worker: nothing answers in time
    result = cli("send", sid, "hello", "--timeout", "0.3")
    assert result.code == LATE, result
    assert "is queued; the reply did not come within 0.3 s; it will be answered" in result.out
    assert f"`hbgw chat {sid}`" in result.out
    [message] = gateway.store.messages.list_messages(sid)
    assert message.state == MessageState.QUEUED


def test_a_failed_turn_is_exit_5_with_its_notice(cli: Hbgw, gateway: Gateway) -> None:
    sid = gateway.session()
    with gateway.worker("w1"):
        result = cli("send", sid, "please FAIL now", "--timeout", "60")
        assert result.code == FAILED_TURN, result
        assert result.out.startswith("⚠ The turn failed")
        ok = cli("send", sid, "hello", "--timeout", "60")
    assert ok.code == 0, ok
    assert "reply to: hello" in ok.out


def test_send_help_names_the_exit_codes(hbgw: Hbgw) -> None:
    text = hbgw("send", "--help").out
    assert "4 queued, no reply within --timeout" in text
    assert "5 the turn failed" in text
