"""Bad input in sessions and messages (issue 7): one sentence, exit 2, the same on SQLite and
PostgreSQL, and nothing reaches SQL. Before, PostgreSQL answered a long chat with DataError and
its SQL text, SQLite stored it; a lone surrogate (a non-UTF-8 argument) crashed the driver.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from support.cli_fixtures import Hbgw
from support.scenarios import LIMITS
from support.seed import T0

from hbgw.core.errors import BadInput, StaleFence
from hbgw.gateway.inbound import Queued, receive
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.states import MessageState
from hbgw.sessions.store import Store
from hbgw.sessions.validation import MessageLimits

NOT_UTF8 = "caf\udce9"  # how Python decodes the byte 0xE9 of a Latin-1 argument
LONG = "x" * 256


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"platform": NOT_UTF8}, "platform is not valid UTF-8"),
        ({"chat": NOT_UTF8}, "chat is not valid UTF-8"),
        ({"thread": NOT_UTF8}, "thread is not valid UTF-8"),
        ({"platform": "p" * 65}, "platform is 65 characters long; at most 64"),
        ({"chat": LONG}, "chat is 256 characters long; at most 255"),
        ({"thread": LONG}, "thread is 256 characters long"),
        ({"owner": LONG}, "owner is 256 characters long"),
        ({"platform": ""}, "platform is empty"),
        ({"chat": "   "}, "chat is empty"),
        ({"chat": "C1\x1b[2J"}, "chat contains a control character at 3"),
        ({"platform": "slack\n"}, "platform contains a control character"),
        ({"chat": "C\x00"}, "NUL"),
    ],
)
def test_session_names_are_checked_before_sql(
    store: Store, fields: dict[str, str], needle: str
) -> None:
    values = {"platform": "slack", "chat": "C1", "thread": "T1", "owner": None, **fields}
    with pytest.raises(BadInput, match=re.escape(needle)):
        store.sessions.create_session(now=T0, **values)  # type: ignore[arg-type]
    assert store.messages.list_messages("none") == []


def test_names_at_their_column_size_are_stored(store: Store) -> None:
    session = store.sessions.create_session(
        platform="p" * 64, chat="c" * 255, thread="t" * 255, now=T0
    )
    assert store.sessions.get_session(session.id).chat == "c" * 255


@pytest.mark.parametrize(
    ("text", "needle"),
    [(NOT_UTF8, "not valid UTF-8"), ("", "empty"), (" \n\t", "empty"), ("a\x00b", "NUL")],
)
def test_user_messages_are_checked_in_the_store(store: Store, text: str, needle: str) -> None:
    sid = store.sessions.create_session(platform="slack", chat="C1", now=T0).id
    with pytest.raises(BadInput, match=re.escape(needle)):
        store.messages.accept_message(sid, text, now=T0, idempotency_key="k")
    with pytest.raises(BadInput, match=re.escape(needle)):
        store.messages.add_message(sid, role="user", kind="user", text=text, now=T0)
    assert store.messages.list_messages(sid) == []


def test_prompt_that_is_not_utf8_is_bad_input(store: Store) -> None:
    sid = store.sessions.create_session(platform="slack", chat="C1", now=T0).id
    with pytest.raises(BadInput, match="prompt is not valid UTF-8"):
        store.heartbeats.set_heartbeat(
            sid, schedule=IntervalSchedule(600), schedule_text="", prompt=NOT_UTF8, now=T0
        )


def test_idempotency_key_is_one_message_per_session(store: Store) -> None:
    sid, other = (
        store.sessions.create_session(platform="p", chat=c, now=T0).id for c in ("A", "B")
    )
    first = store.messages.accept_message(sid, "hello", now=T0, idempotency_key="m-1")
    retry = store.messages.accept_message(
        sid, "hello", now=T0 + timedelta(seconds=5), idempotency_key="m-1"
    )
    elsewhere = store.messages.accept_message(other, "hello", now=T0, idempotency_key="m-1")
    assert (first.duplicate, retry.duplicate, elsewhere.duplicate) == (False, True, False)
    assert retry.message == first.message
    assert elsewhere.message.id != first.message.id
    assert first.message.state == MessageState.QUEUED
    assert first.message.idempotency_key == "m-1"
    with pytest.raises(BadInput, match="idempotency key is 256 characters long"):
        store.messages.accept_message(sid, "hello", now=T0, idempotency_key=LONG)


def test_reply_marks_its_message_done_in_the_same_fenced_transaction(store: Store) -> None:
    sid = store.sessions.create_session(platform="p", chat="A", now=T0).id
    message = store.messages.accept_message(sid, "hello", now=T0, idempotency_key="k").message
    store.ledger.claim_fence(sid, 1, T0)
    store.ledger.claim_fence(sid, 2, T0)  # a newer turn took over
    with pytest.raises(StaleFence):
        store.messages.add_message(sid, role="assistant", kind="assistant", text="old", now=T0,
                          reply_to=message.key, fence=1)  # fmt: skip
    assert (
        store.messages.message_turn(message.id, sid, history=0).message.state == MessageState.QUEUED
    )
    assert store.messages.reply_for(message.id) is None
    store.messages.add_message(
        sid, role="assistant", kind="assistant", text="hi", now=T0, reply_to=message.key, fence=2
    )
    assert (
        store.messages.message_turn(message.id, sid, history=0).message.state == MessageState.DONE
    )
    assert store.restore.queued_page(0, 100).by_session == {}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "The message is empty"),
        ("   ", "The message is empty"),
        ("x" * 11, "at most 10 are accepted (HBGW_MAX_MESSAGE_CHARS)"),
        (NOT_UTF8, "message is not valid UTF-8"),
        (f"/heartbeat every 10m {NOT_UTF8}", "message is not valid UTF-8"),
    ],
)
def test_inbound_rejects_before_storing(store: Store, text: str, needle: str) -> None:
    sid = store.sessions.create_session(platform="slack", chat="C1", now=T0).id
    with pytest.raises(BadInput, match=re.escape(needle)):
        receive(store, sid, text, T0, LIMITS, message_limits=MessageLimits(max_message_chars=10))
    assert store.messages.list_messages(sid) == []
    ok = receive(store, sid, "x" * 10, T0, LIMITS, message_limits=MessageLimits(10))
    assert isinstance(ok, Queued)


def _session(hbgw: Hbgw) -> str:
    return hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("send", "SID", ""), "The message is empty; write some text to send."),
        (("send", "SID", " ", " "), "The message is empty"),
        (("send", "SID", NOT_UTF8), "The message is not valid UTF-8"),
        (("send", "SID", "x" * 30), "The message is 30 characters long; at most 20"),
        (("session", "create", "--platform", "", "--chat", "c"), "The platform is empty"),
        (("session", "create", "--platform", "p", "--chat", LONG), "chat is 256 characters"),
        (("session", "create", "--platform", "p", "--chat", NOT_UTF8), "chat is not valid UTF-8"),
        (("heartbeat", "set", "SID", "--every", "10m", NOT_UTF8), "prompt is not valid UTF-8"),
        (("send", "SID", "--idempotency-key", "", "hi"), "idempotency key is empty"),
    ],
)
def test_cli_bad_input_is_one_sentence_and_exit_2(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], needle: str
) -> None:
    monkeypatch.setenv("HBGW_MAX_MESSAGE_CHARS", "20")
    sid = _session(hbgw)
    result = hbgw(*(sid if a == "SID" else a for a in args))
    assert (result.code, result.err.startswith("Error: ")) == (2, True), result
    assert needle in result.err
    assert result.err.count("\n") == 1


def test_cli_retry_with_the_same_key_is_the_same_message(hbgw: Hbgw) -> None:
    sid = _session(hbgw)
    first = hbgw("send", "--idempotency-key", "k-7", sid, "hello")
    retry = hbgw("send", "--idempotency-key", "k-7", sid, "hello")
    other = hbgw("send", sid, "hello")  # no key: a new one is made up, so a new message
    assert first.out.startswith("Message 1 queued") and first.code == 0
    assert retry.out.startswith("Message 1 queued") and "accepted before" in retry.out
    assert other.out.startswith("Message 2 queued")
