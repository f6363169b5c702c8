"""Every delivery outcome reached through real turns (issue 16, part 3): real Celery workers,
real Redis, real SQL, the file channel as the platform. Sent (with the platform's message id),
suppressed (a silent heartbeat), failed (a channel that cannot write), unknown (a turn cut off
between its send and its record, found by beat), and the resend of an unknown reply marked a
possible repeat. ``hbgw_deliveries_total`` counts each."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from support.fires import lock_free, vanished_turn
from support.harness import Gateway, gateway_settings, wait_until
from support.scenarios import assert_invariants, send

from hbgw.core.clock import to_ms, utcnow
from hbgw.core.metrics import gateway_metrics
from hbgw.gateway.inbound import Queued
from hbgw.sessions.db import make_engine, upgrade
from hbgw.sessions.models import DeliveryRow
from hbgw.sessions.states import DeliveryState, RunState
from hbgw.sessions.views import Outbound
from hbgw.state.turn_gate import Began
from hbgw.workers.turn_io import REPEAT_MARK


def _count(outcome: str) -> float:
    sample = gateway_metrics().registry.get_sample_value(
        "hbgw_deliveries_total", {"platform": "file", "outcome": outcome}
    )
    return sample or 0.0


def _message_deliveries(gw: Gateway, message_id: int) -> dict[str, DeliveryRow]:
    """The records of a user turn's sends, read from SQL (no view lists them yet)."""
    with Session(gw.store.engine) as db:
        rows = db.scalars(select(DeliveryRow).where(DeliveryRow.message_id == message_id))
        return {r.delivery_key: r for r in rows}


def _heartbeat_and_reply(gw: Gateway) -> tuple[str, int]:
    """A heartbeat turn and a user turn of one session, both finished."""
    sid = gw.session()
    gw.due_now(sid)
    gw.tick()
    gw.final_runs(sid)
    queued = send(gw, sid, "hello")
    assert isinstance(queued, Queued)
    wait_until(lambda: gw.store.messages.reply_for(queued.message_id), what="the reply")
    return sid, queued.message_id


def _check_sent(gw: Gateway, sid: str, message_id: int) -> None:
    [run] = gw.runs(sid)
    beat_send, reply_send = gw.deliveries(sid, "send")
    assert run.state == RunState.COMPLETED and run.delivery is not None
    assert (run.delivery.state, run.delivery.attempts) == (DeliveryState.SENT, 1)
    assert run.delivery.platform_message_id == beat_send["message_id"]
    reply = _message_deliveries(gw, message_id)[f"msg:{message_id}"]
    assert (reply.state, reply.attempts, reply.kind) == (DeliveryState.SENT, 1, "reply")
    assert reply.platform_message_id == reply_send["message_id"]


def test_heartbeat_and_user_deliveries_are_recorded_sent(gateway: Gateway) -> None:
    gw, before = gateway, _count("sent")
    with gw.worker("w1"):
        sid, message_id = _heartbeat_and_reply(gw)
    _check_sent(gw, sid, message_id)
    assert _count("sent") == before + 2
    assert_invariants(gw)


@pytest.mark.postgres
def test_deliveries_are_recorded_sent_on_postgres(
    tmp_path: Path, redis_url: str, redis_ns: str, pg_schema_url: str
) -> None:
    engine = make_engine(pg_schema_url)
    upgrade(engine)
    engine.dispose()
    gw = Gateway(
        gateway_settings(tmp_path, redis_url, redis_ns, database_url=pg_schema_url), redis_url
    )
    try:
        with gw.worker("w1"):
            sid, message_id = _heartbeat_and_reply(gw)
        _check_sent(gw, sid, message_id)
    finally:
        gw.close()


def test_a_silent_heartbeat_is_suppressed_and_nothing_is_sent(gateway: Gateway) -> None:
    gw, before = gateway, _count("suppressed")
    with gw.worker("w1"):
        sid = gw.session()
        gw.due_now(sid, prompt="QUIET unless CI is red")
        gw.tick()
        [run] = gw.final_runs(sid)
    assert run.state == RunState.SILENT and run.delivery is not None
    assert (run.delivery.state, run.delivery.attempts) == (DeliveryState.SUPPRESSED, 0)
    assert gw.deliveries(sid, "send") == []
    assert _count("suppressed") == before + 1


def test_a_channel_that_cannot_write_records_failed_with_its_error(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    blocked = tmp_path / "blocked"
    blocked.mkdir()  # the file channel's path is a directory: every send raises
    # No retries: the first failed attempt is the last (retries:
    # tests/e2e/test_delivery_retries.py).
    settings = gateway_settings(
        tmp_path, redis_url, redis_ns, channel_file=blocked, delivery_retries=0
    )
    gw = Gateway(settings, redis_url)
    before = _count("failed")
    try:
        with gw.worker("w1"):
            sid, message_id = _heartbeat_and_reply(gw)
        [run] = gw.runs(sid)
        assert run.state == RunState.FAILED and run.delivery is not None
        assert run.delivery.state == DeliveryState.FAILED
        assert run.delivery.error == run.detail and "delivery failed" in (run.detail or "")
        reply = _message_deliveries(gw, message_id)[f"msg:{message_id}"]
        assert reply.state == DeliveryState.FAILED and "delivery failed" in (reply.error or "")
        assert gw.store.messages.reply_for(message_id).kind == "notice"  # type: ignore[union-attr]
        assert _count("failed") == before + 2
    finally:
        gw.close()


def test_a_heartbeat_cut_off_while_delivering_is_unknown(gateway: Gateway) -> None:
    gw, before = gateway, _count("unknown")
    long_ago = utcnow() - timedelta(seconds=gw.settings.dead_after + 60)
    run = vanished_turn(gw, long_ago, delivering=True)
    lock_free(gw, run.session_id)
    gw.beat.restore_now(to_ms(utcnow()))  # the restore pass settles it as it begins
    [settled] = gw.runs(run.session_id)
    assert settled.delivery is not None and settled.delivery.state == DeliveryState.UNKNOWN
    assert _count("unknown") == before + 1


def test_a_reply_cut_off_between_send_and_record_is_unknown_then_resent_marked(
    gateway: Gateway,
) -> None:
    """An older grant marked the reply pending, then vanished (it may have sent it). Beat
    finds the record pending past HBGW_DEAD_AFTER with the lock free: unknown. The next grant
    sends it again, marked a possible repeat, as the second attempt of the same record."""
    gw, before = gateway, _count("unknown")
    sid = gw.session()
    queued = send(gw, sid, "hello")
    assert isinstance(queued, Queued)
    older = gw.rt.gate.try_begin_user(sid, "older", 100)
    assert isinstance(older, Began)
    long_ago = utcnow() - timedelta(seconds=gw.settings.dead_after + 60)
    gw.store.ledger.claim_fence(sid, older.fence, long_ago)
    key = f"msg:{queued.message_id}"
    reply = [Outbound(key, "reply")]
    gw.store.ledger.begin_reply(
        sid,
        gw.store.messages.message_turn(queued.message_id, sid, history=0).message.key,
        older.fence,
        long_ago,
        channel="file",
        outbound=reply,
    )
    lock_free(gw, sid)
    gw.beat.settle_cut_off(utcnow())
    assert _message_deliveries(gw, queued.message_id)[key].state == DeliveryState.UNKNOWN
    assert _count("unknown") == before + 1
    with gw.worker("w1") as runner:
        runner.drain(sid)
        answer = wait_until(
            lambda: gw.store.messages.reply_for(queued.message_id), what="the reply"
        )
    assert answer.text.startswith(REPEAT_MARK)
    [resend] = gw.deliveries(sid, "send")
    assert (resend["delivery_key"], resend["repeat"]) == (key, True)
    record = _message_deliveries(gw, queued.message_id)[key]
    assert (record.state, record.attempts) == (DeliveryState.SENT, 2)
    assert record.platform_message_id == resend["message_id"]
