"""The store contract: one suite, run unchanged on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from support.seed import T0, make_session_with_heartbeat

from core.clock import to_ms
from core.errors import InvalidState, NotFound, StaleFence
from sessions.grammar import CronSchedule, IntervalSchedule
from sessions.states import (
    HeartbeatStatus,
    RefundReason,
    RunState,
    SessionStatus,
    fire_id,
)
from sessions.store import Store
from sessions.views import Duplicate, RefusalReason, Refused, Reserved

TEN_MIN = IntervalSchedule(seconds=600)


def make(store: Store) -> str:
    return make_session_with_heartbeat(store)


def fire(store: Store, sid: str, now: datetime, fence: int) -> Reserved:
    due = store.heartbeat_status(sid, now).next_due
    assert due is not None
    store.claim_fence(sid, fence, now)  # as a worker does at the lock grant
    outcome = store.reserve_fire(sid, fire_id(sid, to_ms(due)), to_ms(due), fence, now)
    assert isinstance(outcome, Reserved), outcome
    return outcome


def test_set_and_replace(store: Store) -> None:
    sid = make(store)
    status = store.heartbeat_status(sid, T0)
    assert status.status == HeartbeatStatus.ACTIVE
    assert status.next_due == T0 + timedelta(minutes=10)
    assert status.to_json()["origin_chat"] == "C1"
    assert status.to_json()["origin_thread"] == "T1"
    fire(store, sid, T0 + timedelta(minutes=10), fence=1)
    assert store.heartbeat_status(sid, T0).to_json()["fire_count"] == 1

    later = T0 + timedelta(hours=1)
    store.set_heartbeat(
        sid, schedule=IntervalSchedule(seconds=3600), schedule_text="1h", prompt="new", now=later
    )
    replaced = store.heartbeat_status(sid, later).to_json()
    assert replaced["fire_count"] == 0
    assert replaced["prompt"] == "new"
    assert replaced["generation"] == 2
    assert replaced["next_due_at"] == "2026-11-29T14:00:00Z"


def test_cron_heartbeat_next_due(store: Store) -> None:
    session = store.create_session(platform="cli", chat="local", now=T0)
    store.set_heartbeat(
        session.id,
        schedule=CronSchedule(expr="0 9 * * *", timezone="Asia/Tokyo"),
        schedule_text="TZ=Asia/Tokyo 0 9 * * *",
        prompt="morning",
        now=T0,
    )
    status = store.heartbeat_status(session.id, T0).to_json()
    assert status["cron"] == "0 9 * * *"
    assert status["timezone"] == "Asia/Tokyo"
    assert status["next_due_at"] == "2026-11-30T00:00:00Z"  # 09:00 JST


def test_pause_resume_reanchors(store: Store) -> None:
    sid = make(store)
    store.pause_heartbeat(sid, T0 + timedelta(minutes=1))
    paused = store.heartbeat_status(sid, T0 + timedelta(hours=5))
    assert paused.status == HeartbeatStatus.PAUSED
    assert paused.next_due is None
    with pytest.raises(InvalidState):
        store.pause_heartbeat(sid, T0)
    resumed_at = T0 + timedelta(hours=5)
    state = store.resume_heartbeat(sid, resumed_at)
    # No instant catch-up: the clock starts again at the resume.
    assert state.next_due() == resumed_at + timedelta(minutes=10)
    assert state.generation == 3


def test_clear_is_never_current_again(store: Store) -> None:
    sid = make(store)
    store.clear_heartbeat(sid, T0)
    assert store.heartbeat_status(sid, T0).status == "none"
    with pytest.raises(InvalidState):
        store.resume_heartbeat(sid, T0)
    assert store.list_restorable() == []


def test_reserve_counts_and_reanchors(store: Store) -> None:
    sid = make(store)
    late = T0 + timedelta(minutes=55)  # five due times passed
    reserved = fire(store, sid, late, fence=1)
    assert reserved.run.missed == 4
    status = store.heartbeat_status(sid, late)
    assert status.to_json()["fire_count"] == 1
    assert status.next_due == late + timedelta(minutes=10)


def test_reserve_duplicate_fire_id_is_noop(store: Store) -> None:
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    first = fire(store, sid, now, fence=1)
    again = store.reserve_fire(sid, first.run.fire_id, 0, 2, now)
    assert isinstance(again, Duplicate)
    assert again.run.id == first.run.id
    assert store.heartbeat_status(sid, now).to_json()["fire_count"] == 1


def test_reserve_rejects_stale_fence_and_not_due(store: Store) -> None:
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    store.mark_started(fire(store, sid, now, fence=5).run.id, 5, now)
    later = now + timedelta(minutes=10)
    # Only the fence claimed at the lock grant may reserve: an older one, or one never claimed.
    for fence in (4, 6):
        stale = store.reserve_fire(sid, fire_id(sid, fence), 0, fence, later)
        assert stale == Refused(RefusalReason.STALE_FENCE)
    with pytest.raises(StaleFence):
        store.claim_fence(sid, 5, later)  # a second claim of the same fence
    store.claim_fence(sid, 6, later)
    early = store.reserve_fire(sid, fire_id(sid, 2), 0, 6, now + timedelta(minutes=1))
    assert isinstance(early, Refused) and early.reason == RefusalReason.NOT_DUE
    store.pause_heartbeat(sid, later)
    assert store.reserve_fire(sid, fire_id(sid, 3), 0, 6, later) == Refused(RefusalReason.INACTIVE)


def test_mark_started_and_finish_are_fenced(store: Store) -> None:
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    run = fire(store, sid, now, fence=1).run
    with pytest.raises(StaleFence):
        store.mark_started(run.id, 0, now)
    started = store.mark_started(run.id, 1, now)
    assert started.state == RunState.STARTED and started.started_at == now
    with pytest.raises(InvalidState):
        store.refund(run.id, RefundReason.LOCK_LOST, now)
    store.claim_fence(sid, 2, now)  # another turn took over
    with pytest.raises(StaleFence):
        store.finish(run.id, RunState.COMPLETED, 1, now)


def test_finish_records_outcome(store: Store) -> None:
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    run = fire(store, sid, now, fence=1).run
    store.mark_started(run.id, 1, now)
    done = store.finish(run.id, RunState.SILENT, 1, now + timedelta(seconds=3))
    assert done.state == RunState.SILENT
    assert store.heartbeat_status(sid, now).to_json()["last_outcome"] == RunState.SILENT
    with pytest.raises(ValueError):
        store.finish(run.id, "exploded", 1, now)  # type: ignore[arg-type]  # an untyped caller


def test_refund_with_unchanged_generation_restores(store: Store) -> None:
    sid = make(store)
    now = T0 + timedelta(minutes=12)
    run = fire(store, sid, now, fence=1).run
    refunded = store.refund(run.id, RefundReason.OWNER_CHANGED, now)
    assert refunded.state == RunState.REFUNDED
    status = store.heartbeat_status(sid, now)
    assert status.to_json()["fire_count"] == 0
    assert status.next_due == T0 + timedelta(minutes=10)  # previous anchor is back
    assert status.waiting_for_idle


def test_refund_with_changed_generation_is_abandoned(store: Store) -> None:
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    run = fire(store, sid, now, fence=1).run
    store.pause_heartbeat(sid, now)
    abandoned = store.refund(run.id, RefundReason.SESSION_RESET, now)
    assert abandoned.state == RunState.ABANDONED
    status = store.heartbeat_status(sid, now).to_json()
    assert status["fire_count"] == 1
    assert status["status"] == HeartbeatStatus.PAUSED


def test_compress_moves_heartbeat_to_child(store: Store) -> None:
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    fire(store, sid, now, fence=1)
    child = store.compress(sid, now)
    assert child.parent_id == sid
    assert store.get_session(sid).status == SessionStatus.CLOSED
    assert store.heartbeat_status(sid, now).status == "none"
    moved = store.heartbeat_status(child.id, now).to_json()
    assert moved["fire_count"] == 1
    assert moved["next_due_at"] == "2026-11-29T12:20:00Z"
    assert store.resolve_active(sid).id == child.id
    assert [e.session_id for e in store.list_restorable()] == [child.id]


@pytest.mark.parametrize("departure", ["reset", "switch", "suspend"])
def test_departing_conversation_loses_heartbeat(store: Store, departure: str) -> None:
    sid = make(store)
    getattr(store, departure)(sid, T0)
    assert store.heartbeat_status(sid, T0).status == "none"
    assert store.list_restorable() == []
    if departure == "suspend":
        store.resume_session(sid, T0)
        assert store.heartbeat_status(sid, T0).status == "none"


def test_reset_keeps_session_but_bumps_conversation(store: Store) -> None:
    sid = make(store)
    after = store.reset(sid, T0)
    assert after.status == SessionStatus.ACTIVE and after.conversation == 2


def test_list_restorable_skips_paused_cleared_suspended(store: Store) -> None:
    active, paused, cleared, suspended = (make(store) for _ in range(4))
    store.pause_heartbeat(paused, T0)
    store.clear_heartbeat(cleared, T0)
    store.suspend(suspended, T0)
    entries = store.list_restorable()
    assert [e.session_id for e in entries] == [active]
    assert entries[0].next_due_at == T0 + timedelta(minutes=10)


def test_unknown_session_is_a_sentence(store: Store) -> None:
    with pytest.raises(NotFound, match="hbgw session create"):
        store.heartbeat_status("nope", T0)


def test_closed_session_cannot_take_a_heartbeat(store: Store) -> None:
    sid = make(store)
    store.compress(sid, T0)
    with pytest.raises(InvalidState, match="closed"):
        store.set_heartbeat(sid, schedule=TEN_MIN, schedule_text="", prompt="x", now=T0)


def test_newer_fence_gives_back_an_orphaned_reservation(store: Store) -> None:
    sid = make(store)
    first = T0 + timedelta(minutes=10)
    orphan = fire(store, sid, first, fence=1).run  # its worker died before the agent started
    later = first + timedelta(minutes=10)
    fire(store, sid, later, fence=2)
    runs = {r.id: r for r in store.runs(sid)}
    assert runs[orphan.id].state == RunState.REFUNDED
    assert runs[orphan.id].detail == RefundReason.ORPHANED
    assert store.heartbeat_status(sid, later).to_json()["fire_count"] == 1


def test_stale_reservations_oldest_first_at_most_limit(store: Store) -> None:
    """Orphan recovery reads a bounded page of the ledger, through an index (issue 10)."""
    now = T0 + timedelta(minutes=10)
    older = fire(store, make(store), now, fence=1).run
    newer = fire(store, make(store), now + timedelta(seconds=1), fence=1).run
    later = now + timedelta(minutes=1)
    assert [r.id for r in store.stale_reservations(later)] == [older.id, newer.id]
    assert [r.id for r in store.stale_reservations(later, limit=1)] == [older.id]


def test_restore_pages_follow_the_key_and_skip_what_is_not_restorable(store: Store) -> None:
    ids = sorted(make(store) for _ in range(5))
    store.pause_heartbeat(ids[1], T0)
    store.suspend(ids[2], T0)
    first = store.restorable_page("", 2)
    # Paused, and cleared by the suspension: neither is in the index's range at all.
    assert (first.rows, first.last_session) == (2, ids[3])
    assert [e.session_id for e in first.entries] == [ids[0], ids[3]]
    rest = store.restorable_page(first.last_session, 2)
    assert ([e.session_id for e in rest.entries], rest.rows) == ([ids[4]], 1)


def test_refund_orphan_only_while_reserved(store: Store) -> None:
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    run = fire(store, sid, now, fence=1).run
    assert [r.id for r in store.stale_reservations(now + timedelta(seconds=1))] == [run.id]
    assert store.stale_reservations(now) == []
    refunded = store.refund_orphan(run.id, now)
    assert refunded is not None and refunded.state == RunState.REFUNDED
    assert store.refund_orphan(run.id, now) is None
    assert store.heartbeat_status(sid, now).to_json()["fire_count"] == 0
