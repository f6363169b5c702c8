"""The locked session loop's error policy and the runner's edges, path by path, on real Redis
and real SQL (``workers/session_loop.py``, ``workers/runner.py``).

One worker's fire path runs in-process (``support.fire_path.FirePath``, no Celery): a test holds
its only turn thread, changes the world, then lets the turn begin. The faults are real: an
emergency stop, a lock that ran out in Redis, a database another writer keeps locked, a Redis
server stopped. Nothing is slept: outcomes are polled, a lock lost is observed through the
runner's renewals.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import event
from support.fire_path import FirePath
from support.fires import lock_free, vanished_turn
from support.harness import Gateway, gateway_settings, wait_until
from support.jobs import add_job, ago
from support.private_redis import PrivateRedis
from support.scenarios import send, started_run

from hbgw.core.clock import to_ms, utcnow
from hbgw.core.errors import NotFound, StoreError
from hbgw.core.metrics import gateway_metrics
from hbgw.gateway.channels import make_channel
from hbgw.gateway.inbound import Queued
from hbgw.sessions.states import DeliveryState, LostLockDetail, RunState, job_member
from hbgw.sessions.views import RunView
from hbgw.state.runtime import Runtime
from hbgw.workers.agents import make_agent
from hbgw.workers.runner import TurnRunner

NOWHERE = "redis://127.0.0.1:1/0"  # nothing listens on port 1: connection refused at once


@pytest.fixture
def path(gateway: Gateway) -> Iterator[FirePath]:
    """Worker ``w1`` of the gateway, in-process, one turn thread, the lease of the harness."""
    fire_path = FirePath(gateway)
    try:
        yield fire_path
    finally:
        fire_path.close()


@pytest.fixture
def log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="hbgw")
    return caplog


def records(caplog: pytest.LogCaptureFixture, action: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "action", "") == action]


def queued(gw: Gateway, sid: str, text: str) -> Queued:
    message = send(gw, sid, text)
    assert isinstance(message, Queued)
    return message


@contextmanager
def turn_thread_held(fire_path: FirePath) -> Iterator[None]:
    """The only turn thread waits until the block ends: what is accepted inside begins after."""
    hold = threading.Event()
    fire_path.runner.executor.submit(hold.wait, 30)
    try:
        yield
    finally:
        hold.set()


@contextmanager
def database_locked(gw: Gateway) -> Iterator[None]:
    """Another writer holds the SQLite file's write lock (``BEGIN IMMEDIATE``) until the block
    ends: every store transaction (each begins IMMEDIATE) waits for it meanwhile."""
    database = gw.store.engine.url.database
    assert database is not None
    conn = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def in_the_agent(gw: Gateway, sid: str) -> None:
    """The turn's agent step was stamped: its lock, claim and begin are behind it."""
    wait_until(
        lambda: any(s.session == sid and s.phase.startswith("tool:") for s in gw.rt.liveness.all()),
        what="the turn to be in the agent",
    )


def lose_the_lock(gw: Gateway, fire_path: FirePath, sid: str) -> None:
    """The turn's lock runs out in Redis while its keeper is registered; returns once the
    runner's renewals found it gone (the keeper is dropped from them)."""
    renewals = fire_path.runner.renewals
    wait_until(lambda: renewals.held() == 1, what="the turn's keeper to be renewed")
    gw.rt.client.delete(gw.rt.keys.lock(sid))
    wait_until(lambda: renewals.held() == 0, what="the renewals to find the lock gone")


# -- a grant that ends before any turn ---------------------------------------------------------


def test_a_stop_set_while_a_drain_waits_for_its_thread_keeps_the_messages_waiting(
    gateway: Gateway, path: FirePath
) -> None:
    """Admission saw no stop; the session's stop came before the turn thread took the lock: the
    grant's first step is the stop, the lock is given back, nothing is claimed or answered."""
    gw = gateway
    sid = gw.session()
    message = queued(gw, sid, "hello")
    with turn_thread_held(path):
        assert path.runner.drain(sid) == "accepted"
        gw.rt.gate.set_estop(True, sid)
    path.wait_idle()
    assert gw.rt.gate.lock_holder(sid) is None
    assert gw.rt.gate.backlog(sid) == 1
    assert gw.store.ledger.max_fence(sid) == 0  # the grant claimed nothing in SQL
    assert gw.store.messages.reply_for(message.message_id) is None
    gw.rt.gate.set_estop(False, sid)
    path.drain(sid)
    reply = gw.store.messages.reply_for(message.message_id)
    assert reply is not None and reply.text == "user reply to: hello"


def test_a_cron_job_paused_while_its_fire_waits_runs_nothing_and_frees_the_session(
    gateway: Gateway, path: FirePath, log: pytest.LogCaptureFixture
) -> None:
    gw = gateway
    sid = gw.session()
    job = add_job(gw, "every 2m", session=sid, set_at=ago(121))
    member = job_member(job.id)
    due = gw.rt.index.due_ms(member)
    assert due is not None
    with turn_thread_held(path):
        assert path.runner.accept_fires([(member, due)]) == ["accepted"]
        gw.store.jobs.pause_job(job.id, utcnow())
    path.wait_idle()
    assert gw.store.jobs.job_runs(job.id) == []
    assert gw.rt.gate.lock_holder(sid) is None
    assert gw.rt.index.due_ms(member) is None  # paused: the index follows what SQL answered
    [refused] = records(log, "job.refused")
    assert "inactive" in refused.getMessage()


# -- the drain's claim ------------------------------------------------------------------------


def _deliveries(outcome: str) -> float:
    sample = gateway_metrics().registry.get_sample_value(
        "hbgw_deliveries_total", {"platform": "file", "outcome": outcome}
    )
    return sample or 0.0


def test_a_drain_claim_counts_a_cut_off_delivery_as_unknown(
    gateway: Gateway, path: FirePath
) -> None:
    """A worker vanished between its fenced mark and its send: the next grant of the session, a
    drain, settles that run at its claim and counts the delivery ``unknown`` under the channel
    of the session's platform, then answers the message."""
    gw = gateway
    run = vanished_turn(gw, utcnow() - timedelta(seconds=5), delivering=True)
    sid = run.session_id
    lock_free(gw, sid)
    before = _deliveries("unknown")
    message = queued(gw, sid, "hello")
    path.drain(sid)
    [after] = gw.runs(sid)
    assert (after.state, after.detail) == (RunState.FAILED, LostLockDetail.DURING_DELIVERY)
    assert after.delivery is not None and after.delivery.state == DeliveryState.UNKNOWN
    assert _deliveries("unknown") == before + 1
    reply = gw.store.messages.reply_for(message.message_id)
    assert reply is not None and reply.text == "user reply to: hello"


# -- a lock lost: the loop stops, the inbox is the new holder's --------------------------------


def test_a_lock_found_lost_after_the_claim_stops_the_drain_before_its_first_step(
    gateway: Gateway, path: FirePath, log: pytest.LogCaptureFixture
) -> None:
    """The claim waited for the database; meanwhile the lease ran out and the keeper noticed.
    The drain takes no step: it asks Redis for nothing more, and says so in one line."""
    gw = gateway
    sid = gw.session()
    hold = threading.Event()
    path.runner.executor.submit(hold.wait, 30)
    assert path.runner.drain(sid) == "accepted"  # nothing queued: the grant keeps the lock
    with database_locked(gw):
        hold.set()  # the turn thread takes the lock, then its claim waits for the database
        lose_the_lock(gw, path, sid)
    path.wait_idle()
    [aborted] = records(log, "turn.aborted")
    assert aborted.session == sid and aborted.exc_info is None  # type: ignore[attr-defined]
    assert records(log, "turn.crashed") == [] and records(log, "turn.lock_lost") == []
    assert gw.rt.gate.lock_holder(sid) is None


def test_a_failure_after_the_lock_was_lost_is_a_lost_lock(
    gateway: Gateway, path: FirePath, log: pytest.LogCaptureFixture
) -> None:
    """A heartbeat turn fails (the database went away) after its lease ran out: the loop takes
    it for the lost lock, not a turn failure, and leaves the message queued meanwhile to the
    session's next holder instead of draining it under a lock it no longer has."""
    gw = gateway
    sid = gw.session()
    waiting: list[Queued] = []

    def queue_then_lose_the_lock_and_fail(s: str, run: RunView) -> None:
        waiting.append(queued(gw, s, "hello"))
        lose_the_lock(gw, path, s)
        raise StoreError("The database went away.")

    path.runner.after_start.append(queue_then_lose_the_lock_and_fail)
    gw.due_now(sid)
    path.fire(sid)
    [aborted] = records(log, "turn.aborted")
    assert (aborted.session, aborted.exc_info) == (sid, None)  # type: ignore[attr-defined]
    assert records(log, "heartbeat.failed") == []
    [message] = waiting
    assert gw.rt.gate.backlog(sid) == 1
    assert gw.store.messages.reply_for(message.message_id) is None


def test_a_silent_fire_whose_lock_moved_on_stands_and_the_loop_stops_at_the_next_step(
    tmp_path: Path, redis_url: str, redis_ns: str, log: pytest.LogCaptureFixture
) -> None:
    """Redis gave the lock away while the agent ran (a long lease: the keeper has not noticed),
    and SQL has not heard of a newer grant: the silent fire's finish holds. The next step finds
    the lock gone; what the fire left (its next due time) still went in that round trip."""
    release = tmp_path / "release"
    gw = Gateway(gateway_settings(tmp_path, redis_url, redis_ns, lock_lease=60), redis_url)
    fire_path = FirePath(gw)
    try:
        sid = gw.session()
        gw.due_now(sid, prompt=f"HOLD {release} QUIET")
        assert fire_path.runner.accept_fire(sid, fire_path.due_ms(sid)) == "accepted"
        started_run(gw, sid, "the fire to be in its agent")
        gw.rt.client.delete(gw.rt.keys.lock(sid))
        release.touch()
        fire_path.wait_idle()
        [run] = gw.runs(sid)
        state = gw.store.heartbeats.get_heartbeat(sid)
        due = gw.rt.index.due_ms(sid)
    finally:
        fire_path.close()
        gw.close()
    assert run.state == RunState.SILENT
    assert state is not None and (next_due := state.next_due()) is not None
    assert due == to_ms(next_due)
    [lost] = records(log, "turn.lock_lost")
    assert lost.session == sid  # type: ignore[attr-defined]
    assert records(log, "turn.crashed") == [] and records(log, "turn.aborted") == []


# -- a turn that fails: the drain goes on -----------------------------------------------------


def test_user_turns_that_fail_leave_their_messages_for_the_next_grant_in_order(
    gateway: Gateway, path: FirePath, log: pytest.LogCaptureFixture
) -> None:
    """Another writer keeps the database locked past the store's wait: the first turn fails at
    its mark (nothing sent), the drain goes on to the next message, which fails too, and the
    session goes idle. The next grant answers both, in the order they were sent."""
    gw, release = gateway, gateway.settings.home / "release"

    @event.listens_for(path.rt.store.engine, "connect")
    def _short_wait(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA busy_timeout=100")

    path.rt.store.engine.dispose()  # pooled connections are made again, with the short wait
    sid = gw.session()
    first = queued(gw, sid, f"HOLD {release} first")
    second = queued(gw, sid, "second")
    assert path.runner.drain(sid) == "accepted"
    in_the_agent(gw, sid)
    with database_locked(gw):
        release.touch()
        path.wait_idle()
    failed = records(log, "user.failed")
    assert len(failed) == 2
    assert all("StoreError" in r.getMessage() and r.exc_info is None for r in failed)
    assert gw.rt.gate.lock_holder(sid) is None and gw.rt.gate.backlog(sid) == 2
    assert gw.deliveries(sid, "send") == []
    path.drain(sid)
    replies = [r["text"] for r in gw.deliveries(sid, "send")]
    assert replies == [f"user reply to: HOLD {release} first", "user reply to: second"]
    assert gw.store.messages.reply_for(second.message_id) is not None
    assert gw.store.messages.reply_for(first.message_id) is not None


# -- the runner's edges -----------------------------------------------------------------------


def test_a_runner_shut_down_without_waiting_keeps_renewing_the_turns_still_running(
    gateway: Gateway, path: FirePath
) -> None:
    gw, release = gateway, gateway.settings.home / "release"
    sid = gw.session()
    message = queued(gw, sid, f"HOLD {release} hello")
    assert path.runner.drain(sid) == "accepted"
    in_the_agent(gw, sid)
    path.runner.shutdown(wait=False)  # returns at once: the turn is still in its agent
    lock = gw.rt.keys.lock(sid)
    left = gw.rt.client.pttl(lock)
    wait_until(lambda: gw.rt.client.pttl(lock) > left, what="a renewal after the shutdown")
    release.touch()
    reply = wait_until(lambda: gw.store.messages.reply_for(message.message_id), what="the reply")
    assert reply.text == f"user reply to: HOLD {release} hello"


def test_a_drain_asked_while_redis_is_away_is_one_line_and_error(
    gateway: Gateway, log: pytest.LogCaptureFixture
) -> None:
    gw = gateway
    away = Runtime(gw.settings, gw.store, redis.Redis.from_url(NOWHERE), worker="w1")
    runner = TurnRunner(
        away, gw.dispatcher, agent=make_agent(gw.settings), channel=make_channel(gw.settings)
    )
    try:
        sid = gw.session()
        assert runner.drain(sid) == "error"
    finally:
        runner.shutdown()
        away.client.close()
    [line] = records(log, "drain.error")
    assert line.session == sid and line.exc_info is None  # type: ignore[attr-defined]
    assert "ConnectionError" in line.getMessage()


def test_a_drain_for_a_session_nobody_knows_is_raised_not_swallowed(path: FirePath) -> None:
    """Only expected trouble becomes "error"; a drain no session answers is the caller's bug."""
    with pytest.raises(NotFound, match="no session"):
        path.runner.drain("s-nobody")


def test_a_turn_that_cannot_take_its_lock_is_reported(
    tmp_path: Path, private_redis: PrivateRedis, log: pytest.LogCaptureFixture
) -> None:
    """Redis stopped after the drain was accepted, before its turn thread took the lock: what
    escapes the session loop is one line naming the session, never dropped."""
    private_redis.start()
    gw = Gateway(gateway_settings(tmp_path, private_redis.url, "paths"), private_redis.url)
    fire_path = FirePath(gw)
    try:
        sid = gw.session()
        queued(gw, sid, "hello")
        with turn_thread_held(fire_path):
            assert fire_path.runner.drain(sid) == "accepted"
            private_redis.stop()
        fire_path.wait_idle()
        [crashed] = records(log, "turn.crashed")
    finally:
        fire_path.runner.shutdown()
        fire_path.rt.close()
        gw.close()
    assert crashed.session == sid and crashed.exc_info is None  # type: ignore[attr-defined]
    assert "ConnectionError" in crashed.getMessage()
