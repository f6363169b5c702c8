"""The fire path's folded store steps (rule 9, exact counting; fencing), on SQLite and
PostgreSQL: each does what the single-purpose methods it stands for do, in one transaction."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from support.seed import T0, make_session_with_heartbeat

from hbgw.core.clock import to_ms
from hbgw.core.errors import StaleFence
from hbgw.sessions.states import RefundReason, RunState, fire_id
from hbgw.sessions.store import Store
from hbgw.sessions.views import (
    Duplicate,
    FireClaim,
    NotStarted,
    RefusalReason,
    Refused,
    Reserved,
    RunView,
    Started,
)

DUE = T0 + timedelta(minutes=10)
LATER = DUE + timedelta(seconds=5)


def claim(store: Store, sid: str, fence: int, now: datetime = LATER) -> FireClaim:
    return store.claim_fire(sid, fence, fire_id(sid, to_ms(DUE)), to_ms(DUE), now, worker="w1")


def reserved(store: Store, sid: str, fence: int = 1) -> RunView:
    outcome = claim(store, sid, fence).outcome
    assert isinstance(outcome, Reserved), outcome
    return outcome.run


def start(store: Store, run: RunView, fence: int = 1, **kwargs: object) -> Started | NotStarted:
    args: dict[str, object] = {"conversation": 1, "owner_changed": False, "prompt": "do it"}
    args.update(kwargs)
    return store.start_fire(run.key, fence, LATER, history=20, **args)  # type: ignore[arg-type]


def fire_count(store: Store, sid: str) -> int:
    return int(store.heartbeat_status(sid, LATER).to_json()["fire_count"])


def test_claim_fire_counts_once_and_claims_the_fence(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    seen = claim(store, sid, 1)
    assert isinstance(seen.outcome, Reserved)
    assert store.get_session(sid).fence == 1
    assert fire_count(store, sid) == 1
    assert seen.state is not None and seen.state.anchor == LATER
    assert seen.next_due == LATER + timedelta(minutes=10)  # what the index gets
    # The same fire again, under a newer grant: that grant's claim gave the first reservation
    # back (its turn lost the lock), and the fire id is a duplicate; the claim still holds.
    again = claim(store, sid, 2)
    assert isinstance(again.outcome, Duplicate) and store.get_session(sid).fence == 2
    assert again.outcome.run.state == RunState.REFUNDED and fire_count(store, sid) == 0


def test_a_refused_reservation_keeps_its_fence_claim(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    early = claim(store, sid, 1, now=T0 + timedelta(minutes=1))
    assert early.outcome == Refused(RefusalReason.NOT_DUE, DUE)
    assert early.next_due == DUE
    assert store.get_session(sid).fence == 1  # later writes of this grant are fenced
    assert store.runs(sid) == []


def test_claim_fire_with_a_stale_fence_reserves_nothing(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    store.claim_fence(sid, 5, LATER)
    with pytest.raises(StaleFence):
        claim(store, sid, 3)
    assert store.runs(sid) == [] and fire_count(store, sid) == 0


def test_claim_fire_gives_back_an_older_grants_reservation_first(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    old = reserved(store, sid, 1)
    later_due = LATER + timedelta(minutes=10)
    fid = fire_id(sid, to_ms(later_due))
    # The orphan is refunded (anchor back to T0), so the heartbeat is due at once again.
    seen = store.claim_fire(sid, 2, fid, to_ms(later_due), LATER + timedelta(seconds=1))
    assert isinstance(seen.outcome, Reserved)
    [orphan, new] = store.runs(sid)
    assert (orphan.id, orphan.state, orphan.detail) == (old.id, "refunded", RefundReason.ORPHANED)
    assert new.state == RunState.RESERVED and fire_count(store, sid) == 1


def test_start_fire_starts_and_stores_the_prompt_once(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    store.add_message(sid, role="user", kind="user", text="earlier", now=T0)
    run = reserved(store, sid)
    begun = start(store, run)
    assert isinstance(begun, Started)
    assert begun.run.state == RunState.STARTED and begun.run.started_at == LATER
    assert (begun.message.kind, begun.message.text, begun.message.fire_id) == (
        "heartbeat",
        "do it",
        run.fire_id,
    )
    assert [m.text for m in begun.history] == ["earlier"]
    # A repeat (its COMMIT's answer lost) stores nothing twice.
    again = start(store, run)
    assert isinstance(again, Started) and again.message == begun.message
    assert len(store.list_messages(sid)) == 2


@pytest.mark.parametrize(
    ("change", "reason", "state", "count"),
    [
        ("owner", RefundReason.OWNER_CHANGED, RunState.REFUNDED, 0),
        ("suspend", RefundReason.SESSION_SUSPENDED, RunState.ABANDONED, 1),
        ("reset", RefundReason.SESSION_RESET, RunState.ABANDONED, 1),
        ("pause", RefundReason.HEARTBEAT_CHANGED, RunState.ABANDONED, 1),
    ],
)
def test_start_fire_refunds_exactly_with_the_first_reason(
    store: Store, change: str, reason: RefundReason, state: RunState, count: int
) -> None:
    sid = make_session_with_heartbeat(store)
    run = reserved(store, sid)
    if change == "suspend":
        store.suspend(sid, LATER)
    elif change == "reset":
        store.reset(sid, LATER)
    elif change == "pause":
        store.pause_heartbeat(sid, LATER)
    refused = start(store, run, owner_changed=True)  # the owner is weighed last
    assert isinstance(refused, NotStarted)
    assert (refused.reason, refused.run.state, refused.run.detail) == (reason, state, reason)
    again = start(store, run, owner_changed=True)  # a repeat refunds nothing twice
    assert isinstance(again, NotStarted) and again.run.state == state
    if change == "owner":
        assert fire_count(store, sid) == count
        assert store.heartbeat_status(sid, LATER).next_due == DUE  # the old anchor is back
    assert store.list_messages(sid) == []


def test_start_fire_of_a_stale_grant_raises_and_writes_nothing(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    run = reserved(store, sid, 1)
    store.claim_fence(sid, 2, LATER)  # a newer grant: it gave the reservation back
    with pytest.raises(StaleFence):
        start(store, run, fence=1)
    [orphan] = store.runs(sid)
    assert orphan.state == RunState.REFUNDED and fire_count(store, sid) == 0
    assert store.list_messages(sid) == []


def test_finish_fire_stores_reply_and_answers_next_due(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    run = reserved(store, sid)
    assert isinstance(start(store, run), Started)
    done = LATER + timedelta(seconds=3)
    finished = store.finish_fire(
        run.key, RunState.COMPLETED, 1, done, reply="all green", reply_kind="assistant"
    )
    assert finished.run.state == RunState.COMPLETED and finished.run.finished_at == done
    assert finished.next_due == LATER + timedelta(minutes=10)
    again = store.finish_fire(
        run.key, RunState.COMPLETED, 1, done, reply="all green", reply_kind="assistant"
    )
    assert again.run == finished.run
    assert [(m.role, m.text) for m in store.list_messages(sid)] == [
        ("user", "do it"),
        ("assistant", "all green"),
    ]


def test_finish_fire_of_a_stale_turn_records_nothing(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    run = reserved(store, sid)
    assert isinstance(start(store, run), Started)
    store.claim_fence(sid, 2, LATER)  # settles the cut-off run failed
    with pytest.raises(StaleFence):
        store.finish_fire(run.key, RunState.COMPLETED, 1, LATER, reply="x", reply_kind="assistant")
    [failed] = store.runs(sid)
    assert failed.state == RunState.FAILED
    assert [m.role for m in store.list_messages(sid)] == ["user"]


def test_admit_fires_follows_compression_and_sees_the_ledger(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    run = reserved(store, sid)
    child = store.compress(sid, LATER)
    seen, fresh, unknown = store.admit_fires(
        [(sid, run.fire_id), (child.id, fire_id(child.id, 1)), ("no-such", "no-such:1")]
    )
    assert seen is not None and fresh is not None and unknown is None
    assert seen.session.id == child.id and [seen.existing] == store.runs()
    assert seen.state is not None and seen.next_due == LATER + timedelta(minutes=10)
    assert fresh.existing is None and fresh.session.id == child.id


def test_refund_fire_gives_back_and_answers_the_heartbeat(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    run = reserved(store, sid)
    refunded = store.refund_fire(run.key, RefundReason.EMERGENCY_STOP, LATER)
    assert (refunded.reason, refunded.run.state) == (RefundReason.EMERGENCY_STOP, "refunded")
    assert refunded.state is not None and refunded.state.next_due() == DUE
    assert fire_count(store, sid) == 0
