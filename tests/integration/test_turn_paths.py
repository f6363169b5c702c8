"""The turn skeleton and its kinds, path by path, on real Redis and real SQL (``workers/turn.py``,
``workers/turn_io.py``, ``workers/heartbeat_turn.py``).

One worker's fire path runs in-process (``support.fire_path.FirePath``, no Celery); the agent is
the command agent of the tests, or the real OpenAI client against the fake endpoint on loopback.
A race is staged by holding the only turn thread, never by sleeping.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from support.fake_openai import Text, ToolCall, openai_gateway, set_args
from support.fire_path import FirePath
from support.fires import finish, start
from support.harness import Gateway, gateway_settings
from support.scenarios import send

from hbgw.core.clock import to_ms, utcnow
from hbgw.gateway.inbound import Queued
from hbgw.sessions.models import DeliveryRow
from hbgw.sessions.states import DeliveryState, HeartbeatStatus, RunState, fire_id
from hbgw.state.turn_gate import Began

OTHER = "other-worker"


def queued(gw: Gateway, sid: str, text: str) -> Queued:
    message = send(gw, sid, text)
    assert isinstance(message, Queued)
    return message


def delivery_states(gw: Gateway, message_id: int) -> dict[str, str]:
    """The delivery records of a user turn's sends (its notices and its reply), by key."""
    prefix = f"msg:{message_id}"
    with Session(gw.store.engine) as db:
        rows = db.scalars(select(DeliveryRow).where(DeliveryRow.delivery_key.startswith(prefix)))
        return {r.delivery_key: str(r.state) for r in rows}


def records(caplog: pytest.LogCaptureFixture, action: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "action", "") == action]


@pytest.fixture
def path(gateway: Gateway) -> Iterator[FirePath]:
    fire_path = FirePath(gateway)
    try:
        yield fire_path
    finally:
        fire_path.close()


def test_each_heartbeat_change_of_a_user_turn_is_said_before_the_reply_in_order(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    """The agent set the heartbeat, then cleared it, in one turn: two notices, in that order,
    each sent under a lock confirmed afresh and stored with its outcome, then the reply."""
    with openai_gateway(tmp_path, redis_url, redis_ns, agent_heartbeat_write=True) as (
        gw,
        endpoint,
    ):
        endpoint.then(
            ToolCall("set_heartbeat", set_args("every 10m", "check the build")),
            ToolCall("clear_heartbeat"),
            Text("Set, then cleared again."),
        )
        fire_path = FirePath(gw)
        try:
            sid = gw.session()
            message = queued(gw, sid, "set it up, then take it away")
            fire_path.drain(sid)
        finally:
            fire_path.close()
        sent = [(r["kind"], r["text"]) for r in gw.deliveries(sid, "send")]
        notices = [m for m in gw.store.messages.list_messages(sid) if m.kind == "notice"]
        state = gw.store.heartbeats.get_heartbeat(sid)
        reply = gw.store.messages.reply_for(message.message_id)
        states = delivery_states(gw, message.message_id)
    assert [kind for kind, _ in sent] == ["notice", "notice", "reply"]
    assert [text for _, text in sent[:2]] == [n.text for n in notices]
    assert "Heartbeat set" in notices[0].text and "Heartbeat set" not in notices[1].text
    key = f"msg:{message.message_id}"
    assert states == {f"{key}:notice:1": "sent", f"{key}:notice:2": "sent", key: "sent"}
    assert reply is not None and reply.text == "Set, then cleared again."
    assert sent[2] == ("reply", reply.text)
    assert state is not None and state.status == HeartbeatStatus.CLEARED


def test_a_route_refused_for_good_leaves_a_heartbeat_its_owner_paused_as_it_was(
    tmp_path: Path, redis_url: str, redis_ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    """This deployment serves ``cli`` only: a Slack session's reply is refused for good. The
    pause for a gone route is for an active heartbeat; one its owner paused keeps the owner's
    pause (no route reason written over it, nothing said about it)."""
    caplog.set_level(logging.INFO, logger="hbgw")
    gw = Gateway(gateway_settings(tmp_path, redis_url, redis_ns, platforms="cli"), redis_url)
    fire_path = FirePath(gw)
    try:
        sid = gw.session()
        gw.heartbeat(sid)
        gw.store.heartbeats.pause_heartbeat(sid, utcnow())
        message = queued(gw, sid, "hello")
        fire_path.drain(sid)
        state = gw.store.heartbeats.get_heartbeat(sid)
        reply = gw.store.messages.reply_for(message.message_id)
        sends = gw.deliveries(sid, "send")
        states = delivery_states(gw, message.message_id)
    finally:
        fire_path.close()
        gw.close()
    assert reply is not None and sends == []
    assert states == {f"msg:{message.message_id}": DeliveryState.FAILED.value}
    assert state is not None
    assert (state.status, state.paused_reason) == (HeartbeatStatus.PAUSED, None)
    assert records(caplog, "deliver.route_gone") == []
    assert records(caplog, "deliver.pause_failed") == []


def test_a_fire_another_grant_ran_while_it_waited_is_not_run_twice(
    gateway: Gateway, path: FirePath
) -> None:
    """Accepted, the fire waits for a turn thread; meanwhile another worker's grant runs that
    same fire to the end. The waiting turn's begin finds the fire id in the ledger: it runs
    nothing, and the due index gets the next due time SQL answered with the duplicate."""
    gw = gateway
    sid = gw.session()
    gw.due_now(sid)
    due = path.due_ms(sid)
    hold = threading.Event()
    path.runner.executor.submit(hold.wait, 30)
    try:
        assert path.runner.accept_fire(sid, due) == "accepted"
        lease_ms = int(gw.settings.lock_lease * 1000)
        other = gw.rt.gate.try_begin_fire(sid, fire_id(sid, due), OTHER, lease_ms)
        assert isinstance(other, Began)
        run = start(gw.store, sid, other.fence, utcnow())
        assert run.fire_id == fire_id(sid, due)
        finish(gw.store, run.key, RunState.COMPLETED, other.fence, utcnow())
        gw.rt.gate.release(sid, OTHER)
    finally:
        hold.set()
    path.wait_idle()
    [only] = gw.runs(sid)
    assert (only.state, only.fence) == (RunState.COMPLETED, other.fence)
    assert gw.deliveries(sid, "send") == []  # the test's "other worker" sends nothing either
    state = gw.store.heartbeats.get_heartbeat(sid)
    assert state is not None and (next_due := state.next_due()) is not None
    assert to_ms(next_due) > due and gw.rt.index.due_ms(sid) == to_ms(next_due)
    assert gw.rt.gate.lock_holder(sid) is None
