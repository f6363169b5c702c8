"""The fire path's folded store steps (rule 9, exact counting; fencing), on SQLite and
PostgreSQL: ``begin_fire`` claims the fence, reserves, re-checks and starts in one transaction
(or gives the reservation back in it), ``finish_fire`` ends the run with its reply."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from support.seed import T0, make_session_with_heartbeat

from hbgw.core.clock import to_ms
from hbgw.core.errors import StaleFence
from hbgw.sessions.states import LostLockDetail, RefundReason, RunState, fire_id
from hbgw.sessions.store import Store
from hbgw.sessions.views import (
    Duplicate,
    FireBegin,
    FireStart,
    NotStarted,
    RefusalReason,
    Refused,
    RunView,
    Started,
)

DUE = T0 + timedelta(minutes=10)
LATER = DUE + timedelta(seconds=5)


def begin(
    store: Store,
    sid: str,
    fence: int,
    now: datetime = LATER,
    *,
    due: datetime = DUE,
    refusal: RefundReason | None = None,
    conversation: int = 1,
) -> FireBegin:
    start = FireStart(conversation, lambda _: "do it", 20, refusal=refusal, worker="w1")
    return store.ledger.begin_fire(sid, fence, fire_id(sid, to_ms(due)), to_ms(due), now, start)


def started(store: Store, sid: str, fence: int = 1) -> Started:
    outcome = begin(store, sid, fence).outcome
    assert isinstance(outcome, Started), outcome
    return outcome


def fire_count(store: Store, sid: str) -> int:
    return int(store.heartbeats.heartbeat_status(sid, LATER).to_json()["fire_count"])


def test_begin_fire_counts_once_claims_the_fence_and_starts(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    store.messages.add_message(sid, role="user", kind="user", text="earlier", now=T0)
    seen = begin(store, sid, 1)
    begun = seen.outcome
    assert isinstance(begun, Started)
    assert store.sessions.get_session(sid).fence == 1
    assert fire_count(store, sid) == 1 and begun.state.anchor == LATER
    assert seen.next_due == LATER + timedelta(minutes=10)  # what the index gets
    assert (begun.run.state, begun.run.started_at) == (RunState.STARTED, LATER)
    assert (begun.message.kind, begun.message.text, begun.message.fire_id) == (
        "heartbeat",
        "do it",
        begun.run.fire_id,
    )
    assert [m.text for m in begun.history] == ["earlier"]


def test_the_same_fire_under_a_newer_grant_is_a_duplicate(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    first = started(store, sid, 1).run
    # That grant's claim ends the first run (its turn lost the lock); the fire still counts
    # once, and the fire id is a duplicate; the claim holds.
    again = begin(store, sid, 2)
    assert isinstance(again.outcome, Duplicate) and store.sessions.get_session(sid).fence == 2
    [run] = store.ledger.runs(sid)
    assert (run.id, run.state, run.detail) == (first.id, "failed", LostLockDetail.BEFORE_DELIVERY)
    assert fire_count(store, sid) == 1


def test_a_refused_fire_keeps_its_fence_claim_and_writes_no_run(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    early = begin(store, sid, 1, now=T0 + timedelta(minutes=1))
    assert early.outcome == Refused(RefusalReason.NOT_DUE, DUE)
    assert early.next_due == DUE
    assert store.sessions.get_session(sid).fence == 1  # later writes of this grant are fenced
    assert store.ledger.runs(sid) == []


def test_begin_fire_with_a_stale_fence_reserves_nothing(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    store.ledger.claim_fence(sid, 5, LATER)
    with pytest.raises(StaleFence):
        begin(store, sid, 3)
    with pytest.raises(StaleFence):
        begin(store, sid, 5)  # the fence is taken, and no run of this fire carries it
    assert store.ledger.runs(sid) == [] and fire_count(store, sid) == 0


def test_a_repeat_after_a_saved_commit_answers_what_it_stored(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    first = started(store, sid, 1)
    again = begin(store, sid, 1, LATER + timedelta(seconds=1)).outcome
    assert isinstance(again, Started)
    assert (again.run, again.message, again.history) == (first.run, first.message, first.history)
    assert len(store.messages.list_messages(sid)) == 1 and fire_count(store, sid) == 1


@pytest.mark.parametrize(
    "reason", [RefundReason.OWNER_CHANGED, RefundReason.EMERGENCY_STOP, RefundReason.LOCK_LOST]
)
def test_what_redis_read_with_the_lock_gives_the_fire_back_at_once(
    store: Store, reason: RefundReason
) -> None:
    sid = make_session_with_heartbeat(store)
    seen = begin(store, sid, 1, refusal=reason)
    refused = seen.outcome
    assert isinstance(refused, NotStarted)
    assert (refused.reason, refused.run.state, refused.run.detail) == (reason, "refunded", reason)
    assert refused.run.started_at is None
    assert fire_count(store, sid) == 0
    assert store.heartbeats.heartbeat_status(sid, LATER).next_due == DUE  # the anchor never moved
    assert seen.next_due == DUE
    assert store.messages.list_messages(sid) == []
    again = begin(store, sid, 1).outcome  # a repeat after its COMMIT: the same refund
    assert isinstance(again, NotStarted) and again.run == refused.run


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        ("suspend", Refused(RefusalReason.NO_HEARTBEAT)),  # a suspension clears it (rule 10)
        ("pause", Refused(RefusalReason.INACTIVE)),
        ("reset", Refused(RefusalReason.NO_HEARTBEAT)),
    ],
)
def test_a_change_before_the_begin_refuses_the_fire_and_writes_no_run(
    store: Store, change: str, refused: Refused
) -> None:
    """SQL's reasons come first; what Redis read is weighed after them."""
    sid = make_session_with_heartbeat(store)
    if change == "pause":
        store.heartbeats.pause_heartbeat(sid, LATER)
    else:
        getattr(store.sessions, change)(sid, LATER)
    assert begin(store, sid, 1, refusal=RefundReason.OWNER_CHANGED).outcome == refused
    assert store.ledger.runs(sid) == [] and store.messages.list_messages(sid) == []


def test_a_reset_since_admission_gives_the_fire_back(store: Store) -> None:
    """A reset, then a heartbeat due in the new conversation: admission saw the old one."""
    sid = make_session_with_heartbeat(store)
    conversation = store.sessions.get_session(sid).conversation
    refused = begin(store, sid, 1, conversation=conversation - 1).outcome
    assert isinstance(refused, NotStarted) and refused.reason == RefundReason.SESSION_RESET
    assert fire_count(store, sid) == 0


def test_finish_fire_stores_reply_and_answers_next_due(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    run = started(store, sid).run
    done = LATER + timedelta(seconds=3)
    finished = store.ledger.finish_fire(
        run.key, RunState.COMPLETED, 1, done, reply="all green", reply_kind="assistant"
    )
    assert finished.run.state == RunState.COMPLETED and finished.run.finished_at == done
    assert finished.next_due == LATER + timedelta(minutes=10)
    again = store.ledger.finish_fire(
        run.key, RunState.COMPLETED, 1, done, reply="all green", reply_kind="assistant"
    )
    assert again.run == finished.run
    assert [(m.role, m.text) for m in store.messages.list_messages(sid)] == [
        ("user", "do it"),
        ("assistant", "all green"),
    ]


def test_finish_fire_of_a_stale_turn_records_nothing(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    run = started(store, sid).run
    store.ledger.claim_fence(sid, 2, LATER)  # settles the cut-off run failed
    with pytest.raises(StaleFence):
        store.ledger.finish_fire(
            run.key, RunState.COMPLETED, 1, LATER, reply="x", reply_kind="assistant"
        )
    [failed] = store.ledger.runs(sid)
    assert failed.state == RunState.FAILED
    assert [m.role for m in store.messages.list_messages(sid)] == ["user"]


def test_admit_fires_follows_compression_and_sees_the_ledger(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    run: RunView = started(store, sid).run
    child = store.sessions.compress(sid, LATER)
    seen, fresh, unknown = store.ledger.admit_fires(
        [(sid, run.fire_id), (child.id, fire_id(child.id, 1)), ("no-such", "no-such:1")]
    )
    assert seen is not None and fresh is not None and unknown is None
    assert seen.session.id == child.id and [seen.existing] == store.ledger.runs()
    assert seen.state is not None and seen.next_due == LATER + timedelta(minutes=10)
    assert fresh.existing is None and fresh.session.id == child.id
