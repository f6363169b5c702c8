"""SQL is the truth for user messages: every queued message is answered exactly once, whatever
Redis did (issue 7, defect 2) — on a private Redis the test stops, fills and flushes, with real
Celery workers, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.cli_fixtures import Hbgw
from support.harness import Gateway, gateway_settings, wait_until
from support.private_redis import PrivateRedis
from support.scenarios import LIMITS

from hbgw.core.clock import utcnow
from hbgw.gateway.inbound import InboundParts, Queued, receive
from hbgw.sessions.db import make_engine, upgrade
from hbgw.sessions.states import MessageState

NAMESPACE = "durable"


@contextmanager
def deployment(
    tmp_path: Path, server: PrivateRedis, database_url: str | None = None
) -> Iterator[Gateway]:
    overrides = {} if database_url is None else {"database_url": database_url}
    if database_url is not None:
        engine = make_engine(database_url)
        upgrade(engine)
        engine.dispose()
    gw = Gateway(gateway_settings(tmp_path, server.url, NAMESPACE, **overrides), server.url)
    try:
        yield gw
    finally:
        gw.close()


def replies_to(gw: Gateway, sid: str, message_id: int) -> list[str]:
    return [m.text for m in gw.store.messages.list_messages(sid) if m.reply_to == message_id]


def answered_after_ticks(gw: Gateway, sid: str, message_id: int) -> list[str]:
    """Beat ticks until the message has a reply (the restore pass runs on the first tick)."""

    def replied() -> list[str]:
        gw.tick()
        return replies_to(gw, sid, message_id)

    return wait_until(replied, what=f"a reply to message {message_id}")  # type: ignore[no-any-return]


def settle_then_count(gw: Gateway, sid: str, message_id: int) -> int:
    """Run another restore pass and let the inbox drain: a second answer would show up here."""
    gw.beat.restore_now(gw.rt.now_ms())
    # Beat ticks on: its sweeper asks for a session's drain at most once a second.
    wait_until(lambda: gw.tick() and gw.rt.gate.backlog(sid) == 0, what="the inbox to drain")
    return len(replies_to(gw, sid, message_id))


def queue(gw: Gateway, sid: str, text: str) -> Queued:
    """A user message accepted with no worker up yet: it waits in the inbox."""
    result = receive(gw.store, sid, text, utcnow(), LIMITS, parts=InboundParts.of(gw.rt))
    assert isinstance(result, Queued)
    return result


def flushall(server: PrivateRedis) -> None:
    """What a restart without persistence does to Redis: every key is gone."""
    client = server.client()
    client.flushall()
    client.close()


def message_id_in(text: str) -> int:
    match = re.search(r"Message (\d+)", text)
    assert match is not None, text
    return int(match.group(1))


def test_sent_while_redis_is_down_is_answered_once_redis_is_back(
    hbgw: Hbgw, private_redis: PrivateRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HBGW_REDIS_URL", private_redis.url)  # not started: Redis is down
    monkeypatch.setenv("HBGW_NAMESPACE", NAMESPACE)
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    sent = hbgw("send", sid, "hello while Redis is down")
    assert sent.code == 0, sent.err
    assert "stored" in sent.out and "no Redis reachable" in sent.out
    message_id = message_id_in(sent.out)
    private_redis.start()
    with deployment(tmp_path, private_redis) as gw, gw.worker("w1"):
        assert answered_after_ticks(gw, sid, message_id) == [
            "user reply to: hello while Redis is down"
        ]
        assert settle_then_count(gw, sid, message_id) == 1
        assert (
            gw.store.messages.message_turn(message_id, sid, history=0).message.state
            == MessageState.DONE
        )


def test_redis_failing_after_the_insert_is_not_exit_1_and_the_message_is_answered(
    hbgw: Hbgw, private_redis: PrivateRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private_redis.start()
    monkeypatch.setenv("HBGW_REDIS_URL", private_redis.url)
    monkeypatch.setenv("HBGW_NAMESPACE", NAMESPACE)
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    admin = private_redis.client()
    admin.config_set("maxmemory", 1)  # PING still answers; every write is refused (OOM)
    sent = hbgw("send", sid, "hello into a full Redis")
    assert sent.code == 0, sent.err
    assert "stored" in sent.out and "Redis" in sent.out
    message_id = message_id_in(sent.out)
    admin.config_set("maxmemory", 0)
    admin.close()
    with deployment(tmp_path, private_redis) as gw, gw.worker("w1"):
        assert len(answered_after_ticks(gw, sid, message_id)) == 1
        assert settle_then_count(gw, sid, message_id) == 1


def test_flushall_with_messages_waiting_answers_each_once_after_restore(
    private_redis: PrivateRedis, tmp_path: Path, db_url: str
) -> None:
    private_redis.start()
    with deployment(tmp_path, private_redis, db_url) as gw:
        sid, parent = gw.session(chat="A"), gw.session(chat="B")
        sent = [queue(gw, sid, f"m{i}") for i in range(3)]
        before = queue(gw, parent, "before compression")
        child = gw.store.sessions.compress(parent, utcnow())
        assert gw.rt.gate.inbox_length(sid) == 3
        flushall(private_redis)
        with gw.worker("w1"):
            for queued in sent:
                answered_after_ticks(gw, sid, queued.message_id)
            answered_after_ticks(gw, parent, before.message_id)
            assert [settle_then_count(gw, sid, q.message_id) for q in sent] == [1, 1, 1]
        replies = [m for m in gw.store.messages.list_messages(sid) if m.role == "assistant"]
        assert [m.text for m in replies] == [f"user reply to: m{i}" for i in range(3)]
        # Queued before the compression: answered in its own conversation, not the child's.
        assert len(replies_to(gw, parent, before.message_id)) == 1
        assert gw.store.messages.list_messages(child.id) == []


def test_retry_with_the_same_idempotency_key_is_one_message_and_one_reply(
    private_redis: PrivateRedis, tmp_path: Path
) -> None:
    private_redis.start()
    with deployment(tmp_path, private_redis) as gw:
        sid = gw.session()

        def send(text: str) -> Queued:
            result = receive(
                gw.store,
                sid,
                text,
                utcnow(),
                LIMITS,
                parts=InboundParts.of(gw.rt),
                dispatcher=gw.dispatcher,
                idempotency_key="platform-msg-42",
            )
            assert isinstance(result, Queued)
            return result

        first, retry = send("hello once"), send("hello once")
        assert retry.message_id == first.message_id
        assert (first.duplicate, retry.duplicate) == (False, True)
        assert gw.rt.gate.inbox_length(sid) == 1
        with gw.worker("w1"):
            answered_after_ticks(gw, sid, first.message_id)
            late = send("hello once")  # a retry after the answer: still the same message
            assert settle_then_count(gw, sid, first.message_id) == 1
        assert late.message_id == first.message_id
        assert len([m for m in gw.store.messages.list_messages(sid) if m.role == "user"]) == 1


def test_redelivered_message_is_not_answered_twice(
    private_redis: PrivateRedis, tmp_path: Path
) -> None:
    private_redis.start()
    with deployment(tmp_path, private_redis) as gw, gw.worker("w1"):
        sid = gw.session()
        queued = queue(gw, sid, "only once")
        answered_after_ticks(gw, sid, queued.message_id)
        wait_until(lambda: gw.rt.gate.backlog(sid) == 0, what="the ack")
        # A duplicate delivery of the id (a restore racing the answer, a client retry).
        gw.rt.client.rpush(gw.rt.keys.inbox(sid), str(queued.message_id))
        gw.rt.client.sadd(gw.rt.keys.inbox_sessions(), sid)
        assert settle_then_count(gw, sid, queued.message_id) == 1
