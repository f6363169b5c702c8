"""Issue 15, hole 4: a retry whose session was compressed between its two attempts is the same
message. Compression continues the conversation under a child session; the idempotency key is
looked up along the chain of parents (SQLite and PostgreSQL)."""

from __future__ import annotations

from support.seed import T0

from hbgw.sessions.store import Store


def test_a_retry_after_compressions_gets_the_first_message(store: Store) -> None:
    first_session = store.sessions.create_session(platform="slack", chat="C1", thread="T1", now=T0)
    first = store.messages.accept_message(
        first_session.id, "deploy?", now=T0, idempotency_key="m-1"
    )
    child = store.sessions.compress(first_session.id, T0)
    grandchild = store.sessions.compress(child.id, T0)
    assert store.sessions.resolve_active(first_session.id).id == grandchild.id
    retry = store.messages.accept_message(grandchild.id, "deploy?", now=T0, idempotency_key="m-1")
    assert retry.duplicate
    assert retry.message.id == first.message.id
    assert [m.id for m in store.messages.list_messages(grandchild.id)] == []


def test_a_new_key_in_the_child_is_a_new_message(store: Store) -> None:
    parent = store.sessions.create_session(platform="slack", chat="C1", thread="T1", now=T0)
    store.messages.accept_message(parent.id, "one", now=T0, idempotency_key="m-1")
    child = store.sessions.compress(parent.id, T0)
    other = store.messages.accept_message(child.id, "two", now=T0, idempotency_key="m-2")
    assert not other.duplicate
    assert other.message.session_id == child.id
    # Keys of an unrelated conversation are not looked at.
    elsewhere = store.sessions.create_session(platform="slack", chat="C2", thread="T1", now=T0)
    assert not store.messages.accept_message(
        elsewhere.id, "one", now=T0, idempotency_key="m-1"
    ).duplicate
