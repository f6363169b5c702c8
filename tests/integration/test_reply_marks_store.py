"""The durable marks before a send (issue 15), on SQLite and PostgreSQL: a user message records
the grant about to send its reply, so a newer grant knows an older one's outcome is unknown; a
heartbeat turn that stopped before its send says so, even from ``delivering``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.seed import T0, make_session_with_heartbeat

from hbgw.core.clock import to_ms
from hbgw.core.errors import StaleFence
from hbgw.sessions.states import LostLockDetail, RunState, fire_id
from hbgw.sessions.store import Store
from hbgw.sessions.views import FireStart, MessageKey, Outbound, ReplyStart, Started

DUE = T0 + timedelta(minutes=10)
LATER = DUE + timedelta(seconds=5)


def _begin(store: Store, sid: str, message: MessageKey, fence: int) -> ReplyStart | None:
    reply = [Outbound(f"msg:{message.id}", "reply")]
    return store.ledger.begin_reply(sid, message, fence, T0, channel="file", outbound=reply)


def _drop(store: Store, message: MessageKey, fence: int, earlier: int | None) -> None:
    unsent = [f"msg:{message.id}"]
    store.ledger.drop_reply_mark(message, fence, earlier, T0, unsent=unsent, nothing_sent=True)


def test_begin_reply_marks_the_message_and_a_newer_grant_sees_a_possible_repeat(
    store: Store,
) -> None:
    sid = make_session_with_heartbeat(store)
    message = store.messages.accept_message(sid, "hello", now=T0, idempotency_key="k1").message
    store.ledger.claim_fence(sid, 1, T0)
    first = _begin(store, sid, message.key, 1)
    assert first is not None and not first.possible_repeat
    again = _begin(store, sid, message.key, 1)  # the same grant, after a lost COMMIT
    assert again is not None and not again.possible_repeat
    store.ledger.claim_fence(sid, 2, T0)  # the first grant vanished before recording a reply
    with pytest.raises(StaleFence):
        _begin(store, sid, message.key, 1)
    newer = _begin(store, sid, message.key, 2)
    assert newer is not None and newer.possible_repeat
    store.messages.add_message(
        sid, role="assistant", kind="assistant", text="hi", reply_to=message.key, now=T0, fence=2
    )
    assert _begin(store, sid, message.key, 2) is None  # answered: nothing to send


def test_an_unmarked_message_is_no_repeat(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    message = store.messages.accept_message(sid, "hello", now=T0, idempotency_key="k1").message
    store.ledger.claim_fence(sid, 4, T0)  # older grants never got as far as the mark
    start = _begin(store, sid, message.key, 4)
    assert start is not None and not start.possible_repeat


def test_a_grant_that_sent_nothing_takes_its_mark_back(store: Store) -> None:
    """A turn stopped before its send (the lock not confirmed in time): the next grant's reply
    is no false repeat, while an older grant's unknown outcome still is."""
    sid = make_session_with_heartbeat(store)
    message = store.messages.accept_message(sid, "hello", now=T0, idempotency_key="k1").message
    store.ledger.claim_fence(sid, 1, T0)
    first = _begin(store, sid, message.key, 1)
    assert first is not None
    _drop(store, message.key, 1, first.earlier)
    store.ledger.claim_fence(sid, 2, T0)
    second = _begin(store, sid, message.key, 2)
    assert second is not None and not second.possible_repeat  # grant 1 sent nothing
    store.ledger.claim_fence(sid, 3, T0)  # grant 2 vanished with its mark: its outcome is unknown
    third = _begin(store, sid, message.key, 3)
    assert third is not None and third.possible_repeat and third.earlier == 2
    _drop(store, message.key, 3, third.earlier)  # grant 3 sent nothing: 2's mark back
    _drop(store, message.key, 1, None)  # a stale grant's take-back: not its mark
    store.ledger.claim_fence(sid, 4, T0)
    fourth = _begin(store, sid, message.key, 4)
    assert fourth is not None and fourth.possible_repeat and fourth.earlier == 2


@pytest.mark.parametrize(
    ("nothing_sent", "detail"),
    [(True, LostLockDetail.BEFORE_DELIVERY), (False, LostLockDetail.DURING_DELIVERY)],
)
def test_settle_lost_from_delivering_says_whether_anything_left(
    store: Store, nothing_sent: bool, detail: LostLockDetail
) -> None:
    sid = make_session_with_heartbeat(store)
    fid = fire_id(sid, to_ms(DUE))
    start = FireStart(1, lambda _: "do it", 20, worker="w1")
    begun = store.ledger.begin_fire(sid, 1, fid, to_ms(DUE), LATER, start).outcome
    assert isinstance(begun, Started)
    run = begun.run
    store.ledger.mark_delivering(run.key, 1, LATER, channel="file", kind="heartbeat")
    settled = store.ledger.settle_lost(run.key, 1, LATER, nothing_sent=nothing_sent)
    assert settled is not None and (settled.state, settled.detail) == (RunState.FAILED, detail)
