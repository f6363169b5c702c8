"""The delivery retry and the route pause through the store, on SQLite and PostgreSQL: a
``retrying`` record keeps what its resend needs, a drain grant's claim reads the due ones, the
retry is marked and recorded fenced; a permanent refusal pauses the heartbeat of that route
only, with its reason, and resume clears it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.fires import start
from support.seed import T0, make_session_with_heartbeat

from hbgw.core.errors import StaleFence
from hbgw.sessions.states import DeliveryState, HeartbeatStatus, RunState
from hbgw.sessions.store import Store
from hbgw.sessions.views import DeliveryOutcome, Resend

T1 = T0 + timedelta(minutes=11)
LATER = T1 + timedelta(minutes=1)


def _retrying(store: Store) -> tuple[str, str]:
    """A heartbeat run finished whose send failed for now, due again at LATER."""
    sid = make_session_with_heartbeat(store)
    run = start(store, sid, 1, T1)
    store.ledger.mark_delivering(run.key, 1, T1, channel="slack", kind="heartbeat")
    resend = Resend("CI is green", "C1", "T1", None, LATER, maybe_sent=True)
    failed = DeliveryOutcome(
        run.fire_id, DeliveryState.RETRYING, error="delivery retrying: 503", resend=resend
    )
    store.ledger.finish_fire(
        run.key, RunState.COMPLETED, 1, T1, reply="CI is green", reply_kind="assistant",
        delivered=failed,
    )  # fmt: skip
    return sid, run.fire_id


def test_a_retry_is_read_with_the_drain_claim_then_sent_fenced(store: Store) -> None:
    sid, fid = _retrying(store)
    assert store.deliveries.sessions_with_due_retries(T1, 10) == []  # not due yet
    assert store.deliveries.sessions_with_due_retries(LATER, 10) == [sid]
    [due] = store.ledger.claim_fence(sid, 2, LATER, retries=5).retries
    assert (due.delivery_key, due.text, due.chat, due.thread) == (fid, "CI is green", "C1", "T1")
    assert due.maybe_sent and due.state == DeliveryState.RETRYING
    with pytest.raises(StaleFence):
        store.deliveries.begin_retry(due.id, 1, LATER)  # an older grant sends nothing
    attempt = store.deliveries.begin_retry(due.id, 2, LATER)
    assert attempt is not None and attempt.platform == "slack"
    assert (attempt.delivery.state, attempt.delivery.attempts) == (DeliveryState.PENDING, 2)
    sent = DeliveryOutcome(fid, DeliveryState.SENT, platform_message_id="1700000000.000200")
    store.deliveries.finish_retry(sid, 2, sent, LATER)
    [run] = store.ledger.runs(sid)
    assert run.delivery is not None and run.delivery.outcome == "delivered"
    assert (run.delivery.attempts, run.delivery.text) == (2, None)
    assert store.deliveries.begin_retry(due.id, 2, LATER) is None  # sent: nothing to retry
    assert store.deliveries.sessions_with_due_retries(LATER, 10) == []


def test_a_route_refusal_pauses_its_heartbeat_and_resume_clears_it(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    assert (
        store.heartbeats.pause_for_route(sid, "C-other", "gone", T1) is None
    )  # another chat's route
    paused = store.heartbeats.pause_for_route(sid, "C1", "Slack refused the message for good", T1)
    assert paused is not None and paused.status == HeartbeatStatus.PAUSED
    shown = store.heartbeats.heartbeat_status(sid, T1).to_json()
    assert shown["paused_reason"] == "Slack refused the message for good"
    assert store.heartbeats.pause_for_route(sid, None, "again", T1) is None  # paused already
    store.heartbeats.resume_heartbeat(sid, LATER)
    assert store.heartbeats.heartbeat_status(sid, LATER).to_json()["paused_reason"] is None


def test_a_retry_whose_session_ended_is_given_up_with_its_reason(store: Store) -> None:
    """A retry waits in its session; suspended meanwhile, nobody will ever send it: beat's ask
    settles it failed, instead of asking for a drain at every pass for ever."""
    sid, _fid = _retrying(store)
    store.sessions.suspend(sid, T1)
    assert store.deliveries.sessions_with_due_retries(LATER, 10) == []
    [run] = store.ledger.runs(sid)
    assert run.delivery is not None and run.delivery.state == DeliveryState.FAILED
    assert "session was compressed, closed or suspended" in (run.delivery.error or "")
    assert store.deliveries.sessions_with_due_retries(LATER, 10) == []
