"""The shared vocabulary: fire ids, and that the store keeps exactly the enum values."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, text
from support import fires
from support.seed import T0, make_session_with_heartbeat

from hbgw.sessions.states import (
    ClosedReason,
    HeartbeatStatus,
    LostLockDetail,
    MessageState,
    RefundReason,
    RunState,
    SessionStatus,
    fire_id,
    parse_fire_id,
)
from hbgw.sessions.store import Store
from hbgw.sessions.views import RunView


@given(session_id=st.text(min_size=1, max_size=40), due_ms=st.integers(0, 2**53))
def test_fire_id_round_trips(session_id: str, due_ms: int) -> None:
    assert parse_fire_id(fire_id(session_id, due_ms)) == (session_id, due_ms)


def test_session_id_with_colons_splits_at_the_last_one() -> None:
    assert fire_id("slack:C1:T1", 1700000000000) == "slack:C1:T1:1700000000000"
    assert parse_fire_id("slack:C1:T1:1700000000000") == ("slack:C1:T1", 1700000000000)


@pytest.mark.parametrize(
    "garbage", ["", "s1", "s1:", ":123", "s1:x", "s1:-5", "s1:1.5", "s1:12 ", "123"]
)
def test_parse_fire_id_rejects_garbage(garbage: str) -> None:
    with pytest.raises(ValueError, match="not a fire id"):
        parse_fire_id(garbage)


def _stored(engine: Engine, sql: str) -> set[str]:
    with engine.connect() as conn:
        return {row[0] for row in conn.execute(text(sql)) if row[0] is not None}


def _start(store: Store, sid: str, fence: int, minutes: int) -> RunView:
    return fires.start(store, sid, fence, T0 + timedelta(minutes=minutes))


def test_stored_states_are_exactly_the_enum_values(store: Store, migrated_engine: Engine) -> None:
    """Every state column holds the plain enum text, whatever path wrote it."""
    finished, refunded, abandoned = (make_session_with_heartbeat(store) for _ in range(3))
    run = _start(store, finished, 1, 10)
    fires.finish(store, run.key, RunState.SILENT, 1, T0)
    at = T0 + timedelta(minutes=10)
    fires.begin(store, refunded, 1, at, refusal=RefundReason.OWNER_CHANGED)
    cut_off = _start(store, make_session_with_heartbeat(store), 1, 10)
    store.ledger.claim_fence(cut_off.session_id, 2, at)  # a newer grant ends it failed
    store.heartbeats.pause_heartbeat(abandoned, T0)
    store.heartbeats.resume_heartbeat(abandoned, T0)
    store.heartbeats.pause_heartbeat(abandoned, at)
    store.heartbeats.clear_heartbeat(refunded, T0)
    store.sessions.compress(finished, T0)
    store.sessions.switch(refunded, T0)
    store.sessions.suspend(make_session_with_heartbeat(store), T0)
    store.messages.add_message(abandoned, role="user", kind="user", text="hi", now=T0)
    store.messages.add_message(
        abandoned, role="user", kind="user", text="?", now=T0, state=MessageState.QUEUED
    )

    assert _stored(migrated_engine, "select state from heartbeat_runs") == {
        "silent",
        "refunded",
        "failed",
    }
    assert _stored(migrated_engine, "select detail from heartbeat_runs") == {
        RefundReason.OWNER_CHANGED.value,
        LostLockDetail.BEFORE_DELIVERY.value,
    }
    assert _stored(migrated_engine, "select status from sessions") == {
        s.value for s in SessionStatus
    }
    assert _stored(migrated_engine, "select closed_reason from sessions") == {
        r.value for r in ClosedReason
    }
    assert _stored(migrated_engine, "select status from heartbeats") == {
        h.value for h in HeartbeatStatus
    }
    assert _stored(migrated_engine, "select state from messages") == {m.value for m in MessageState}
    assert _stored(migrated_engine, "select last_outcome from heartbeats") == {
        RunState.SILENT.value,
        RunState.FAILED.value,
        f"refunded: {RefundReason.OWNER_CHANGED.value}",
    }


def test_views_carry_enum_members(store: Store) -> None:
    """A plain string handed in still comes back as the enum member."""
    sid = make_session_with_heartbeat(store)
    assert type(store.sessions.get_session(sid).status) is SessionStatus
    heartbeat = store.heartbeats.get_heartbeat(sid)
    assert heartbeat is not None and type(heartbeat.status) is HeartbeatStatus
    _start(store, sid, 1, 10)
    assert [type(r.state) for r in store.ledger.runs(sid)] == [RunState]
    # A plain string from an older caller is stored and read back as the enum member.
    message = store.messages.add_message(
        sid,
        role="user",
        kind="user",
        text="x",
        now=T0,
        state="queued",  # type: ignore[arg-type]
    )
    assert (
        type(store.messages.message_turn(message.id, sid, history=0).message.state) is MessageState
    )


def test_an_unknown_outcome_is_rejected(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    run = _start(store, sid, 1, 10)
    with pytest.raises(ValueError, match="outcome must be one of"):
        fires.finish(store, run.key, RunState.REFUNDED, 1, T0)
