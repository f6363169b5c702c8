"""The store contract: one suite, run unchanged on SQLite and PostgreSQL, through the API the
production code calls (the ledger's states made with a worker's steps, ``support.fires``)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from support.fires import begin, due_fire, finish, restorable, start
from support.seed import T0, make_session_with_heartbeat

from hbgw.core.errors import InvalidState, NotFound, StaleFence
from hbgw.sessions.grammar import CronSchedule, IntervalSchedule
from hbgw.sessions.states import (
    HeartbeatStatus,
    LostLockDetail,
    RefundReason,
    RunState,
    SessionStatus,
)
from hbgw.sessions.store import Store
from hbgw.sessions.views import Duplicate, FireStart, NotStarted, RefusalReason, Refused, RunView

TEN_MIN = IntervalSchedule(seconds=600)


def make(store: Store) -> str:
    return make_session_with_heartbeat(store)


def fire(store: Store, sid: str, now: datetime, fence: int) -> RunView:
    """The grant ``fence`` claims the session, reserves and starts its due fire, as a worker
    does (one transaction)."""
    return start(store, sid, fence, now)


def begin_at(store: Store, sid: str, fence: int, fid: str, due_ms: int, now: datetime) -> object:
    """``begin_fire`` of a given fire id; its outcome."""
    conversation = store.sessions.get_session(sid).conversation
    return store.ledger.begin_fire(
        sid, fence, fid, due_ms, now, FireStart(conversation, str, 0)
    ).outcome


def test_set_and_replace(store: Store) -> None:
    sid = make(store)
    status = store.heartbeats.heartbeat_status(sid, T0)
    assert status.status == HeartbeatStatus.ACTIVE
    assert status.next_due == T0 + timedelta(minutes=10)
    assert status.to_json()["origin_chat"] == "C1"
    assert status.to_json()["origin_thread"] == "T1"
    fire(store, sid, T0 + timedelta(minutes=10), fence=1)
    assert store.heartbeats.heartbeat_status(sid, T0).to_json()["fire_count"] == 1

    later = T0 + timedelta(hours=1)
    store.heartbeats.set_heartbeat(
        sid, schedule=IntervalSchedule(seconds=3600), schedule_text="1h", prompt="new", now=later
    )
    replaced = store.heartbeats.heartbeat_status(sid, later).to_json()
    assert replaced["fire_count"] == 0
    assert replaced["prompt"] == "new"
    assert replaced["generation"] == 2
    assert replaced["next_due_at"] == "2026-11-29T14:00:00Z"


def test_cron_heartbeat_next_due(store: Store) -> None:
    session = store.sessions.create_session(platform="cli", chat="local", now=T0)
    store.heartbeats.set_heartbeat(
        session.id,
        schedule=CronSchedule(expr="0 9 * * *", timezone="Asia/Tokyo"),
        schedule_text="TZ=Asia/Tokyo 0 9 * * *",
        prompt="morning",
        now=T0,
    )
    status = store.heartbeats.heartbeat_status(session.id, T0).to_json()
    assert status["cron"] == "0 9 * * *"
    assert status["timezone"] == "Asia/Tokyo"
    assert status["next_due_at"] == "2026-11-30T00:00:00Z"  # 09:00 JST


def test_pause_resume_reanchors(store: Store) -> None:
    sid = make(store)
    store.heartbeats.pause_heartbeat(sid, T0 + timedelta(minutes=1))
    paused = store.heartbeats.heartbeat_status(sid, T0 + timedelta(hours=5))
    assert paused.status == HeartbeatStatus.PAUSED
    assert paused.next_due is None
    with pytest.raises(InvalidState):
        store.heartbeats.pause_heartbeat(sid, T0)
    resumed_at = T0 + timedelta(hours=5)
    state = store.heartbeats.resume_heartbeat(sid, resumed_at)
    # No instant catch-up: the clock starts again at the resume.
    assert state.next_due() == resumed_at + timedelta(minutes=10)
    assert state.generation == 3


def test_clear_is_never_current_again(store: Store) -> None:
    sid = make(store)
    store.heartbeats.clear_heartbeat(sid, T0)
    assert store.heartbeats.heartbeat_status(sid, T0).status == "none"
    with pytest.raises(InvalidState):
        store.heartbeats.resume_heartbeat(sid, T0)
    assert restorable(store) == []


def test_reserve_counts_and_reanchors(store: Store) -> None:
    sid = make(store)
    late = T0 + timedelta(minutes=55)  # five due times passed
    reserved = fire(store, sid, late, fence=1)
    assert reserved.missed == 4
    status = store.heartbeats.heartbeat_status(sid, late)
    assert status.to_json()["fire_count"] == 1
    assert status.next_due == late + timedelta(minutes=10)


def test_reserve_duplicate_fire_id_is_noop(store: Store) -> None:
    """A fire delivered again after its turn ran: one ledger row, counted once."""
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    first = fire(store, sid, now, fence=1)
    finish(store, first.key, RunState.COMPLETED, 1, now)
    again = begin_at(store, sid, 2, first.fire_id, 0, now)
    assert isinstance(again, Duplicate)
    assert again.run.id == first.id and again.run.state == RunState.COMPLETED
    assert len(store.ledger.runs(sid)) == 1
    assert store.heartbeats.heartbeat_status(sid, now).to_json()["fire_count"] == 1


def test_claim_rejects_stale_fence_and_reserves_only_when_due(store: Store) -> None:
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    fire(store, sid, now, fence=5)
    later = now + timedelta(minutes=10)
    fid, due_ms = due_fire(store, sid, later)
    # Only a grant newer than the session's fence may claim (and so reserve): an older one, or
    # a second claim of the same fence, raises and reserves nothing.
    for fence in (4, 5):
        with pytest.raises(StaleFence):
            begin_at(store, sid, fence, fid, due_ms, later)
    assert len(store.ledger.runs(sid)) == 1
    assert store.heartbeats.heartbeat_status(sid, later).to_json()["fire_count"] == 1
    early = begin_at(store, sid, 6, fid, due_ms, now + timedelta(minutes=1))
    assert isinstance(early, Refused) and early.reason == RefusalReason.NOT_DUE
    store.heartbeats.pause_heartbeat(sid, later)
    paused = begin_at(store, sid, 7, fid, due_ms, later)
    assert paused == Refused(RefusalReason.INACTIVE)
    assert len(store.ledger.runs(sid)) == 1


def test_begin_and_finish_are_fenced(store: Store) -> None:
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    with pytest.raises(StaleFence):
        fire(store, sid, now, fence=0)
    run = fire(store, sid, now, fence=1)
    assert run.state == RunState.STARTED and run.started_at == now
    store.ledger.claim_fence(sid, 2, now)  # another turn took over
    with pytest.raises(StaleFence):
        finish(store, run.key, RunState.COMPLETED, 1, now)


def test_finish_records_outcome(store: Store) -> None:
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    run = fire(store, sid, now, fence=1)
    done = finish(store, run.key, RunState.SILENT, 1, now + timedelta(seconds=3))
    assert done.state == RunState.SILENT
    assert store.heartbeats.heartbeat_status(sid, now).to_json()["last_outcome"] == RunState.SILENT
    with pytest.raises(ValueError):
        finish(store, run.id, "exploded", 1, now)  # type: ignore[arg-type]  # an untyped caller


@pytest.mark.parametrize(
    "reason", [RefundReason.OWNER_CHANGED, RefundReason.EMERGENCY_STOP, RefundReason.LOCK_LOST]
)
def test_a_refused_begin_gives_the_reservation_back_at_once(
    store: Store, reason: RefundReason
) -> None:
    """What Redis read with the lock refuses the fire: the run is written ``refunded`` in the
    transaction that reserved it; the count and the anchor are as before."""
    sid = make(store)
    now = T0 + timedelta(minutes=12)
    refused = begin(store, sid, 1, now, refusal=reason).outcome
    assert isinstance(refused, NotStarted) and refused.reason == reason
    [run] = store.ledger.runs(sid)
    assert (run.state, run.detail, run.started_at) == (RunState.REFUNDED, reason, None)
    status = store.heartbeats.heartbeat_status(sid, now)
    assert status.to_json()["fire_count"] == 0
    assert status.to_json()["last_outcome"] == f"refunded: {reason}"
    assert status.next_due == T0 + timedelta(minutes=10)  # the anchor never moved
    assert status.due_now and not status.waiting_for_idle  # nothing runs: SQL alone knows not


def test_a_session_reset_since_admission_refuses_the_begin(store: Store) -> None:
    """Admission saw the conversation before a reset: the begin gives the fire back."""
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    fid, due_ms = due_fire(store, sid, now)
    stale = FireStart(store.sessions.get_session(sid).conversation - 1, str, 0)
    refused = store.ledger.begin_fire(sid, 1, fid, due_ms, now, stale).outcome
    assert isinstance(refused, NotStarted) and refused.reason == RefundReason.SESSION_RESET
    assert store.heartbeats.heartbeat_status(sid, now).to_json()["fire_count"] == 0


def test_compress_moves_heartbeat_to_child(store: Store) -> None:
    sid = make(store)
    now = T0 + timedelta(minutes=10)
    fire(store, sid, now, fence=1)
    child = store.sessions.compress(sid, now)
    assert child.parent_id == sid
    assert store.sessions.get_session(sid).status == SessionStatus.CLOSED
    assert store.heartbeats.heartbeat_status(sid, now).status == "none"
    moved = store.heartbeats.heartbeat_status(child.id, now).to_json()
    assert moved["fire_count"] == 1
    assert moved["next_due_at"] == "2026-11-29T12:20:00Z"
    assert store.sessions.resolve_active(sid).id == child.id
    assert [e.session_id for e in restorable(store)] == [child.id]


@pytest.mark.parametrize("departure", ["reset", "switch", "suspend"])
def test_departing_conversation_loses_heartbeat(store: Store, departure: str) -> None:
    sid = make(store)
    getattr(store.sessions, departure)(sid, T0)
    assert store.heartbeats.heartbeat_status(sid, T0).status == "none"
    assert restorable(store) == []
    if departure == "suspend":
        store.sessions.resume_session(sid, T0)
        assert store.heartbeats.heartbeat_status(sid, T0).status == "none"


def test_reset_keeps_session_but_bumps_conversation(store: Store) -> None:
    sid = make(store)
    after = store.sessions.reset(sid, T0)
    assert after.status == SessionStatus.ACTIVE and after.conversation == 2


def test_restore_skips_paused_cleared_suspended(store: Store) -> None:
    active, paused, cleared, suspended = (make(store) for _ in range(4))
    store.heartbeats.pause_heartbeat(paused, T0)
    store.heartbeats.clear_heartbeat(cleared, T0)
    store.sessions.suspend(suspended, T0)
    entries = restorable(store)
    assert [e.session_id for e in entries] == [active]
    assert entries[0].next_due_at == T0 + timedelta(minutes=10)


def test_unknown_session_is_a_sentence(store: Store) -> None:
    with pytest.raises(NotFound, match="hbgw session create"):
        store.heartbeats.heartbeat_status("nope", T0)


def test_closed_session_cannot_take_a_heartbeat(store: Store) -> None:
    sid = make(store)
    store.sessions.compress(sid, T0)
    with pytest.raises(InvalidState, match="closed"):
        store.heartbeats.set_heartbeat(sid, schedule=TEN_MIN, schedule_text="", prompt="x", now=T0)


def test_newer_fence_ends_a_started_run_and_reserves_no_orphan(store: Store) -> None:
    """A heartbeat's reservation is never left waiting for a refund (it starts in the
    transaction that makes it): a newer grant finds the older run in its turn and ends it."""
    sid = make(store)
    first = T0 + timedelta(minutes=10)
    cut = fire(store, sid, first, fence=1)  # its worker died after the start
    later = first + timedelta(minutes=10)
    fire(store, sid, later, fence=2)
    runs = {r.id: r for r in store.ledger.runs(sid)}
    assert (runs[cut.id].state, runs[cut.id].detail) == (
        RunState.FAILED,
        LostLockDetail.BEFORE_DELIVERY,
    )
    assert store.heartbeats.heartbeat_status(sid, later).to_json()["fire_count"] == 2
    assert store.ledger.stale_reservations(later + timedelta(minutes=1)) == []


def test_restore_pages_follow_the_key_and_skip_what_is_not_restorable(store: Store) -> None:
    ids = sorted(make(store) for _ in range(5))
    store.heartbeats.pause_heartbeat(ids[1], T0)
    store.sessions.suspend(ids[2], T0)
    first = store.restore.restorable_page("", 2)
    # Paused, and cleared by the suspension: neither is in the index's range at all.
    assert (first.rows, first.last_session) == (2, ids[3])
    assert [e.session_id for e in first.entries] == [ids[0], ids[3]]
    rest = store.restore.restorable_page(first.last_session, 2)
    assert ([e.session_id for e in rest.entries], rest.rows) == ([ids[4]], 1)
