"""The fire path's store rules off the planned path (rule 9, exact counting; fencing; rule 10,
compression), on SQLite and PostgreSQL: what an older worker's reservation becomes (given back
while nothing changed, abandoned otherwise), a lost run that meets a changed heartbeat, a fire
finished in a session compressed during its turn, the repeats the fenced steps answer, and the
steps refused with a sentence (no such session or run, a run not in its turn)."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from sqlalchemy.orm import Session as OrmSession
from support.seed import T0, make_session_with_heartbeat
from support.sql_count import counting_sql

from hbgw.core.clock import to_ms
from hbgw.core.errors import InvalidState, NotFound, StaleFence
from hbgw.sessions import heartbeat as hb
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.models import RunRow
from hbgw.sessions.states import (
    DeliveryState,
    HeartbeatStatus,
    LostLockDetail,
    RefundReason,
    RunState,
    fire_id,
)
from hbgw.sessions.store import Store
from hbgw.sessions.store.base import heartbeat_row
from hbgw.sessions.store.heartbeat_records import apply_state, heartbeat_state
from hbgw.sessions.store.reservations import reserved_values
from hbgw.sessions.store.run_views import run_view
from hbgw.sessions.views import (
    FireBegin,
    FireStart,
    MessageKey,
    NotStarted,
    Outbound,
    RunKey,
    RunView,
    Started,
)

DUE = T0 + timedelta(minutes=10)  # the heartbeat of ``make_session_with_heartbeat``: every 10m
LATER = DUE + timedelta(seconds=5)
AFTER = LATER + timedelta(minutes=1)
FID_DUE = to_ms(DUE)


def begin_at_due(
    store: Store, sid: str, fence: int, *, refusal: RefundReason | None = None
) -> FireBegin:
    start = FireStart(1, lambda _state: "check CI", 5, refusal=refusal, worker="w1")
    return store.ledger.begin_fire(sid, fence, fire_id(sid, FID_DUE), FID_DUE, LATER, start)


def started(store: Store, sid: str, fence: int = 1) -> RunView:
    begun = begin_at_due(store, sid, fence).outcome
    assert isinstance(begun, Started), begun
    return begun.run


def given_back_at_once(store: Store, sid: str, fence: int = 1) -> RunView:
    begun = begin_at_due(store, sid, fence, refusal=RefundReason.EMERGENCY_STOP).outcome
    assert isinstance(begun, NotStarted), begun
    return begun.run


def heartbeat(store: Store, sid: str) -> hb.HeartbeatState:
    state = store.heartbeats.get_heartbeat(sid)
    assert state is not None
    return state


def older_workers_reservation(store: Store, sid: str, fence: int) -> RunView:
    """A reservation as a worker of the two-step begin (before ``begin_fire``) left it under
    its grant ``fence``: counted, the anchor moved to ``LATER``, never started. No step makes
    one any more (a heartbeat's run now starts in the transaction that reserves it); beat and
    the next grant still give back one that a database kept from then."""
    store.ledger.claim_fence(sid, fence, LATER)
    with OrmSession(store.engine) as db, db.begin():
        row = heartbeat_row(db, sid)
        assert row is not None
        state = heartbeat_state(row)
        values = reserved_values(
            fire_id(sid, FID_DUE), sid, state, fence=fence, due_ms=FID_DUE, now=LATER,
            worker="w0", deferred=False, heartbeat_id=row.id,
        )  # fmt: skip
        run = RunRow(**values)
        db.add(run)
        apply_state(row, hb.reserve(state, LATER), LATER)
        db.flush()
        return run_view(run)


def only_run(store: Store, sid: str) -> RunView:
    [run] = store.ledger.runs(sid)
    return run


# An older worker's reservation (rule 9: a fire that never reached the agent never counts).


def test_a_newer_grant_gives_back_the_reservation_an_older_worker_left(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    older_workers_reservation(store, sid, 1)
    assert heartbeat(store, sid).fire_count == 1
    claim = store.ledger.claim_fence(sid, 2, AFTER)
    assert claim.unknown == 0  # nothing of it was ever sent
    run = only_run(store, sid)
    assert (run.state, run.detail, run.finished_at) == (
        RunState.REFUNDED,
        RefundReason.ORPHANED,
        AFTER,
    )
    state = heartbeat(store, sid)
    assert (state.fire_count, state.anchor, state.last_fired) == (0, T0, None)
    assert state.next_due() == DUE  # due again at once
    assert state.last_outcome == f"refunded: {RefundReason.ORPHANED}"


def test_beat_gives_back_an_older_workers_reservation_once(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    reserved = older_workers_reservation(store, sid, 1)
    assert [r.id for r in store.ledger.stale_reservations(AFTER)] == [reserved.id]
    refunded = store.ledger.refund_orphan(reserved.key, AFTER)
    assert refunded is not None and refunded.state == RunState.REFUNDED
    assert (heartbeat(store, sid).fire_count, heartbeat(store, sid).anchor) == (0, T0)
    assert store.ledger.refund_orphan(reserved.key, AFTER) is None  # it moved on
    assert store.ledger.stale_reservations(AFTER) == []


@pytest.mark.parametrize("change", ["pause", "set again"])
def test_a_reservation_whose_heartbeat_changed_since_is_abandoned_and_moves_nothing(
    store: Store, change: str
) -> None:
    """The newer configuration wins: the refund finds another generation and gives nothing
    back to it."""
    sid = make_session_with_heartbeat(store)
    reserved = older_workers_reservation(store, sid, 1)
    if change == "pause":
        store.heartbeats.pause_heartbeat(sid, LATER)
    else:
        store.heartbeats.set_heartbeat(
            sid, schedule=IntervalSchedule(300), schedule_text="every 5m", prompt="p", now=LATER
        )
    before = heartbeat(store, sid)
    abandoned = store.ledger.refund_orphan(reserved.key, AFTER)
    assert abandoned is not None
    assert (abandoned.state, abandoned.detail) == (RunState.ABANDONED, RefundReason.ORPHANED)
    after = heartbeat(store, sid)
    assert (after.fire_count, after.anchor, after.generation, after.status) == (
        before.fire_count,
        before.anchor,
        before.generation,
        before.status,
    )
    assert after.last_outcome == before.last_outcome


# A run cut off by a newer grant (rule 9: it counts and ends failed).


@pytest.mark.parametrize("changed", [False, True])
def test_a_lost_run_records_its_failure_only_on_the_generation_that_fired(
    store: Store, changed: bool
) -> None:
    sid = make_session_with_heartbeat(store)
    started(store, sid, 1)
    if changed:
        store.heartbeats.pause_heartbeat(sid, LATER)
    store.ledger.claim_fence(sid, 2, AFTER)
    run = only_run(store, sid)
    assert (run.state, run.detail) == (RunState.FAILED, LostLockDetail.BEFORE_DELIVERY)
    state = heartbeat(store, sid)
    assert state.fire_count == 1  # it reached the agent: it counts
    if changed:  # the pause's outcome stands; the paused heartbeat is not written over
        assert (state.status, state.last_outcome) == (HeartbeatStatus.PAUSED, None)
    else:
        assert state.last_outcome == RunState.FAILED


# Compression during a turn (rule 10: the heartbeat moves to the child intact).


def test_a_fire_finished_after_its_session_was_compressed_settles_the_moved_heartbeat(
    store: Store,
) -> None:
    sid = make_session_with_heartbeat(store)
    run = started(store, sid, 1)
    child = store.sessions.compress(sid, LATER).id
    finished = store.ledger.finish_fire(
        run.key, RunState.COMPLETED, 1, AFTER, reply="ok", reply_kind="assistant"
    )
    assert finished.run.state == RunState.COMPLETED
    assert finished.next_due is None  # the closed parent's index entry: none
    state = heartbeat(store, child)
    assert (state.fire_count, state.last_outcome, state.anchor) == (1, RunState.COMPLETED, LATER)
    assert store.heartbeats.get_heartbeat(sid) is None


# Repeats and refusals of the fenced steps.


def test_an_empty_admission_batch_costs_no_transaction(store: Store) -> None:
    with counting_sql(store.engine) as count:
        assert store.ledger.admit_fires([]) == []
    assert count.snapshot() == (0, 0)


def test_a_begin_repeated_by_a_grant_whose_run_has_ended_is_stale(store: Store) -> None:
    """Only a repeat that finds its own run as its cut-off COMMIT left it (started, or given
    back) answers from it; a run that moved on since is no repeat: nothing is reserved."""
    sid = make_session_with_heartbeat(store)
    run = started(store, sid, 1)
    store.ledger.finish_fire(run.key, RunState.COMPLETED, 1, AFTER, reply="ok", reply_kind="a")
    with pytest.raises(StaleFence):
        begin_at_due(store, sid, 1)
    assert [r.state for r in store.ledger.runs(sid)] == [RunState.COMPLETED]
    assert heartbeat(store, sid).fire_count == 1


def test_mark_delivering_repeated_after_a_lost_commit_answers_the_same_mark(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    run = started(store, sid, 1)
    first = store.ledger.mark_delivering(run.key, 1, LATER, channel="file", kind="heartbeat")
    again = store.ledger.mark_delivering(run.key, 1, AFTER, channel="file", kind="heartbeat")
    assert again == first and again.state == RunState.DELIVERING
    delivery = only_run(store, sid).delivery
    assert delivery is not None
    assert (delivery.state, delivery.attempts, delivery.created_at) == (
        DeliveryState.PENDING,
        1,
        LATER,
    )


def test_only_a_started_run_delivers_or_finishes(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    refunded = given_back_at_once(store, sid)
    with pytest.raises(InvalidState, match="only a started run delivers"):
        store.ledger.mark_delivering(refunded.key, 1, AFTER, channel="file", kind="heartbeat")
    with pytest.raises(InvalidState, match="only a started run finishes"):
        store.ledger.finish_fire(
            refunded.key, RunState.COMPLETED, 1, AFTER, reply="ok", reply_kind="assistant"
        )
    run = only_run(store, sid)
    assert (run.state, run.started_at, run.delivery) == (RunState.REFUNDED, None, None)
    assert heartbeat(store, sid).fire_count == 0


def test_a_run_no_longer_in_its_turn_is_not_settled_again(store: Store) -> None:
    """Neither the turn's own ``settle_lost`` nor beat's cut-off settlement touches a run that
    finished: None, the outcome stands."""
    sid = make_session_with_heartbeat(store)
    run = started(store, sid, 1)
    store.ledger.finish_fire(run.key, RunState.COMPLETED, 1, AFTER, reply="ok", reply_kind="a")
    assert store.ledger.settle_lost(run.key, 1, AFTER) is None
    assert store.ledger.settle_cut_off(run.key, AFTER + timedelta(hours=1)) is None
    assert only_run(store, sid).state == RunState.COMPLETED
    assert heartbeat(store, sid).last_outcome == RunState.COMPLETED


def test_a_step_on_a_run_that_does_not_exist_is_not_found(store: Store) -> None:
    make_session_with_heartbeat(store)
    nowhere = RunKey(10**9, date(2026, 11, 29))
    with pytest.raises(NotFound, match=f"no run {10**9}"):
        store.ledger.mark_delivering(nowhere, 1, AFTER, channel="file", kind="heartbeat")
    with pytest.raises(NotFound, match=f"no run {10**9}"):
        store.ledger.finish_fire(
            nowhere, RunState.COMPLETED, 1, AFTER, reply="ok", reply_kind="assistant"
        )


def test_a_grant_for_a_session_that_does_not_exist_is_not_found_and_says_how(
    store: Store,
) -> None:
    with pytest.raises(NotFound, match="hbgw session create"):
        store.ledger.claim_fence("s-nowhere", 1, LATER)
    with pytest.raises(NotFound, match="hbgw session create"):
        begin_at_due(store, "s-nowhere", 1)


# The take-back of a user turn's mark (issue 15).


def _marked(store: Store, sid: str, fence: int) -> tuple[MessageKey, list[str]]:
    """A queued message grant ``fence`` is about to answer: a notice, then the reply, pending."""
    message = store.messages.accept_message(sid, "hello", now=T0, idempotency_key="k1").message
    store.ledger.claim_fence(sid, fence, T0)
    keys = [f"msg:{message.id}:notice:1", f"msg:{message.id}"]
    outbound = [Outbound(keys[0], "notice"), Outbound(keys[1], "reply")]
    mark = store.ledger.begin_reply(sid, message.key, fence, T0, channel="file", outbound=outbound)
    assert mark is not None and not mark.possible_repeat
    return message.key, keys


def _pending(store: Store) -> list[str]:
    return sorted(d.delivery_key for d in store.deliveries.stale_deliveries(AFTER))


def test_a_grant_that_sent_part_of_its_answer_keeps_its_mark(store: Store) -> None:
    """The notice left, the reply did not: only the reply's attempt is taken back, and the
    next grant's reply is a possible repeat of this one's (what it sent is known only to it)."""
    sid = make_session_with_heartbeat(store)
    message, (notice, reply) = _marked(store, sid, 1)
    store.ledger.drop_reply_mark(message, 1, None, LATER, unsent=[reply], nothing_sent=False)
    assert _pending(store) == [notice]
    store.ledger.claim_fence(sid, 2, LATER)
    outbound = [Outbound(reply, "reply")]
    newer = store.ledger.begin_reply(sid, message, 2, LATER, channel="file", outbound=outbound)
    assert newer is not None and (newer.possible_repeat, newer.earlier) == (True, 1)


def test_a_take_back_after_the_reply_was_recorded_changes_nothing(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    message, keys = _marked(store, sid, 1)
    store.messages.add_message(
        sid, role="assistant", kind="assistant", text="hi", reply_to=message, now=LATER, fence=1
    )
    store.ledger.drop_reply_mark(message, 1, None, LATER, unsent=keys, nothing_sent=True)
    assert _pending(store) == sorted(keys)  # the records stay as the grant left them
    gone = MessageKey(10**9, message.created_at)
    store.ledger.drop_reply_mark(gone, 1, None, LATER, unsent=keys, nothing_sent=True)
    assert _pending(store) == sorted(keys)
