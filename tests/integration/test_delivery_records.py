"""The delivery record through the store's production steps, on SQLite and PostgreSQL (issue 16,
part 3): pending with the fenced mark, the outcome with the finish, ``unknown`` when a claim, a
later attempt or beat finds a turn cut off between its send and its record."""

from __future__ import annotations

from datetime import timedelta

from support.fires import start
from support.seed import T0, make_session_with_heartbeat

from hbgw.sessions.states import DeliveryState, RunState
from hbgw.sessions.store import Store
from hbgw.sessions.store.deliveries import CUT_OFF_ERROR, NOT_SENT_ERROR
from hbgw.sessions.views import DeliveryOutcome, DeliveryView, MessageKey, Outbound, RunKey

T1 = T0 + timedelta(minutes=11)
LATER = T1 + timedelta(minutes=1)


def _delivery(store: Store, sid: str) -> DeliveryView | None:
    [run] = store.ledger.runs(sid)
    return run.delivery


def _delivering(store: Store, fence: int = 1) -> tuple[str, RunKey, str]:
    """A heartbeat run marked delivering by grant ``fence``: session, run key, fire id."""
    sid = make_session_with_heartbeat(store)
    run = start(store, sid, fence, T1)
    store.ledger.mark_delivering(run.key, fence, T1, channel="file", kind="heartbeat")
    return sid, run.key, run.fire_id


def test_a_heartbeat_delivery_is_pending_with_its_mark_then_sent_with_its_finish(
    store: Store,
) -> None:
    sid, run_id, fid = _delivering(store)
    pending = _delivery(store, sid)
    assert pending is not None
    assert (pending.state, pending.attempts, pending.delivery_key) == (
        DeliveryState.PENDING,
        1,
        fid,
    )
    assert (pending.channel, pending.kind, pending.created_at) == ("file", "heartbeat", T1)
    sent = DeliveryOutcome(fid, DeliveryState.SENT, platform_message_id="1700000000.000100")
    store.ledger.finish_fire(
        run_id, RunState.COMPLETED, 1, LATER, reply="ok", reply_kind="assistant", delivered=sent
    )
    done = _delivery(store, sid)
    assert done is not None
    assert (done.state, done.platform_message_id, done.updated_at) == (
        DeliveryState.SENT,
        "1700000000.000100",
        LATER,
    )
    assert store.ledger.runs(sid)[0].to_json()["delivery"]["state"] == "sent"


def test_a_failed_send_keeps_its_error_bounded(store: Store) -> None:
    sid, run_id, fid = _delivering(store)
    failed = DeliveryOutcome(fid, DeliveryState.FAILED, error="delivery failed: " + "x" * 5000)
    store.ledger.finish_fire(
        run_id,
        RunState.FAILED,
        1,
        LATER,
        reply="ok",
        reply_kind="notice",
        detail="delivery failed",
        delivered=failed,
    )
    done = _delivery(store, sid)
    assert done is not None and done.state == DeliveryState.FAILED
    assert done.error is not None and done.error.startswith("delivery failed: x")
    assert len(done.error) == 500


def test_a_silent_heartbeat_is_recorded_suppressed_without_an_attempt(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    run = start(store, sid, 1, T1)
    quiet = DeliveryOutcome(run.fire_id, DeliveryState.SUPPRESSED)
    store.ledger.finish_fire(
        run.key,
        RunState.SILENT,
        1,
        LATER,
        reply="[silent]",
        reply_kind="assistant",
        delivered=quiet,
        channel="file",
    )
    done = _delivery(store, sid)
    assert done is not None and (done.state, done.attempts) == (DeliveryState.SUPPRESSED, 0)


def test_a_newer_grant_finds_a_delivering_run_cut_off_and_its_delivery_unknown(
    store: Store,
) -> None:
    sid, _, _ = _delivering(store)
    assert store.ledger.claim_fence(sid, 2, LATER).unknown == 1
    done = _delivery(store, sid)
    assert done is not None
    assert (done.state, done.error, done.updated_at) == (
        DeliveryState.UNKNOWN,
        CUT_OFF_ERROR,
        LATER,
    )


def test_a_turn_that_stopped_before_its_send_records_it_failed_not_unknown(store: Store) -> None:
    sid, run_id, _ = _delivering(store)
    store.ledger.settle_lost(run_id, 1, LATER, nothing_sent=True)
    done = _delivery(store, sid)
    assert done is not None and (done.state, done.error) == (DeliveryState.FAILED, NOT_SENT_ERROR)
    assert store.ledger.claim_fence(sid, 2, LATER).unknown == 0  # settled already: nothing unknown


def _reply(store: Store, sid: str, message: MessageKey, fence: int) -> int:
    """Grant ``fence`` marks a notice and the reply pending; the cut-off attempts it found."""
    keys = [
        Outbound(f"msg:{message.id}:notice:1", "notice"),
        Outbound(f"msg:{message.id}", "reply"),
    ]
    store.ledger.claim_fence(sid, fence, T1)
    begun = store.ledger.begin_reply(sid, message, fence, T1, channel="file", outbound=keys)
    assert begun is not None
    return begun.unknown


def test_a_user_reply_tried_again_after_a_cut_off_counts_its_attempts(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    message = store.messages.accept_message(sid, "hello", now=T0, idempotency_key="k1").message
    assert _reply(store, sid, message.key, 1) == 0
    # Grant 1 vanished between its sends and their records: grant 2 finds both pending.
    assert _reply(store, sid, message.key, 2) == 2
    key = f"msg:{message.id}"
    store.messages.add_message(
        sid,
        role="assistant",
        kind="assistant",
        text="hi",
        reply_to=message.key,
        now=LATER,
        fence=2,
        delivered=DeliveryOutcome(key, DeliveryState.SENT),
    )
    [stale] = store.deliveries.stale_deliveries(LATER + timedelta(minutes=1))
    assert (stale.delivery_key, stale.attempts, stale.fence) == (f"{key}:notice:1", 2, 2)
    # Beat saw the lock free past HBGW_DEAD_AFTER: the notice's outcome is unknown.
    settled = store.deliveries.settle_cut_off_delivery(stale.id, stale.fence, LATER)
    assert settled is not None and settled.state == DeliveryState.UNKNOWN
    assert store.deliveries.settle_cut_off_delivery(stale.id, stale.fence, LATER) is None  # once
    assert store.deliveries.stale_deliveries(LATER + timedelta(minutes=1)) == []


def test_beat_leaves_a_record_a_newer_grant_took_over(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    message = store.messages.accept_message(sid, "hello", now=T0, idempotency_key="k1").message
    _reply(store, sid, message.key, 1)
    seen = store.deliveries.stale_deliveries(LATER)
    _reply(store, sid, message.key, 2)  # a newer grant's attempt, pending under its fence
    assert all(store.deliveries.settle_cut_off_delivery(d.id, d.fence, LATER) is None for d in seen)


def test_a_grant_that_stopped_before_its_sends_takes_the_attempts_back(store: Store) -> None:
    sid = make_session_with_heartbeat(store)
    message = store.messages.accept_message(sid, "hello", now=T0, idempotency_key="k1").message
    _reply(store, sid, message.key, 1)
    key = f"msg:{message.id}"
    store.ledger.drop_reply_mark(
        message.key, 1, None, LATER, unsent=[f"{key}:notice:1", key], nothing_sent=True
    )
    assert (
        store.deliveries.stale_deliveries(LATER + timedelta(minutes=1)) == []
    )  # none left pending
    assert _reply(store, sid, message.key, 2) == 0  # nothing was cut off: no unknown
