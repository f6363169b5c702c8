"""``store.sessions.session_at``: a platform's chat and thread find their one open session, on
SQLite and PostgreSQL; first messages of one thread arriving together make one session."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from hbgw.core.clock import utcnow
from hbgw.sessions.store import Store
from hbgw.sessions.views import SessionView


def test_an_address_finds_its_open_session(store: Store) -> None:
    now = utcnow()

    def at(thread: str | None, owner: str = "slack:T1", create: bool = True) -> SessionView | None:
        return store.sessions.session_at(
            platform="slack", chat="C1", thread=thread, now=now, owner=owner, create=create
        )

    assert at("1.1", create=False) is None
    first = at("1.1")
    assert first is not None
    again = at("1.1")
    assert again is not None and again.id == first.id
    channel = at(None)  # the channel is another address
    other_team = at("1.1", owner="slack:T2")
    assert channel is not None and other_team is not None
    assert len({first.id, channel.id, other_team.id}) == 3
    switched = store.sessions.switch(first.id, now)  # the chat moves on: the new session is found
    found = at("1.1")
    assert found is not None and found.id == switched.id


def test_first_messages_at_once_make_one_session(store: Store) -> None:
    def first() -> str:
        found = store.sessions.session_at(
            platform="slack", chat="C9", thread="7.7", now=utcnow(), owner="slack:T1"
        )
        assert found is not None
        return found.id

    with ThreadPoolExecutor(4) as pool:
        ids = set(pool.map(lambda _: first(), range(8)))
    assert len(ids) == 1
