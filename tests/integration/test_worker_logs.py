"""What the worker logs when things go wrong (issue 7, defects 6 and 10): an expected, transient
failure is one line with the action, session, fire id and cause; a traceback is for the
unexpected; an emergency stop is said once per stop and session.

Real Redis, SQL and Celery workers; the failures are real exceptions of a real Redis client
(pointed at a port where nothing listens) or raised from the runner's ``after_start`` seam.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
import redis
from celery.signals import task_postrun
from support.fire_path import fire_path_gateway
from support.harness import Gateway, wait_until
from support.scenarios import send

from hbgw.core.clock import utcnow
from hbgw.core.errors import StoreError
from hbgw.gateway.channels import make_channel
from hbgw.sessions.states import fire_id
from hbgw.sessions.views import RunView
from hbgw.state.dispatch import DRAIN_TASK
from hbgw.state.runtime import Runtime
from hbgw.workers.agents import make_agent
from hbgw.workers.runner import TurnRunner

NOWHERE = "redis://127.0.0.1:1/0"  # nothing listens on port 1: connection refused at once


def runner_records(caplog: pytest.LogCaptureFixture, action: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "action", "") == action]


def test_fires_accepted_while_redis_is_away_are_one_line_each(
    gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 6: a Redis error escaped the fire task, a traceback per batch, and the rest of
    the batch was not even tried."""
    gw = gateway
    caplog.set_level(logging.INFO)
    away = Runtime(gw.settings, gw.store, redis.Redis.from_url(NOWHERE), worker="w1")
    runner = TurnRunner(
        away,
        gw.dispatcher,
        agent=make_agent(gw.settings),
        channel=make_channel(gw.settings),
        threads=1,
    )
    try:
        sessions = [gw.session(chat="A"), gw.session(chat="B")]
        fires = []
        for sid in sessions:
            gw.due_now(sid)
            due = gw.rt.index.due_ms(sid)
            assert due is not None
            fires.append((sid, due))
        assert runner.accept_fires(fires) == ["error", "error"]
    finally:
        runner.shutdown()
        away.client.close()
    lines = runner_records(caplog, "fire.error")
    assert [(r.session, r.fire_id) for r in lines] == [  # type: ignore[attr-defined]
        (sid, fire_id(sid, due)) for sid, due in fires
    ]
    assert all(r.exc_info is None and "ConnectionError" in r.getMessage() for r in lines)
    assert [r for r in caplog.records if r.exc_info] == []


@pytest.mark.parametrize(
    ("error", "traceback"),
    [
        (redis.ConnectionError("Connection refused."), False),
        (redis.exceptions.OutOfMemoryError("OOM command not allowed."), False),
        (StoreError("The database went away."), False),
        (ValueError("a bug"), True),
    ],
)
def test_a_turn_failure_is_one_line_unless_unexpected(
    gateway: Gateway, caplog: pytest.LogCaptureFixture, error: Exception, traceback: bool
) -> None:
    gw = gateway
    caplog.set_level(logging.INFO)
    with gw.worker("w1") as runner:
        sid = gw.session()

        def fail(s: str, run: RunView) -> None:
            raise error

        runner.after_start.append(fail)
        gw.due_now(sid)
        gw.tick()
        [line] = wait_until(lambda: runner_records(caplog, "heartbeat.failed"), what="the log")
    [run] = gw.runs(sid)
    assert (line.session, line.fire_id) == (sid, run.fire_id)
    assert type(error).__name__ in line.getMessage()
    assert (line.exc_info is not None) is traceback
    assert [r for r in caplog.records if r.exc_info] == ([line] if traceback else [])


def test_emergency_stop_is_logged_once_per_stop_and_session(
    gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 10: beat's sweeper asks for a held inbox about once a second, and every ask was
    logged (Celery's ``drain_inbox … 'estop'`` line)."""
    gw = gateway
    caplog.set_level(logging.INFO)
    held: list[Any] = []

    def count_held(sender: Any = None, retval: Any = None, **_: Any) -> None:
        if getattr(sender, "name", "") == DRAIN_TASK and retval == "estop":
            held.append(retval)

    task_postrun.connect(count_held, weak=False)
    try:
        with gw.worker("w1"):
            sid = gw.session()
            gw.rt.gate.set_estop(True)
            send(gw, sid, "hello?")
            for asks in range(1, 4):
                # Beat ticks until its sweeper asks for the held inbox again (once a second).
                wait_until(lambda: gw.tick() and len(held) >= asks, what=f"{asks} held drains")  # noqa: B023
            assert len(runner_records(caplog, "drain.estop")) == 1
            gw.rt.gate.set_estop(False)
            wait_until(
                lambda: gw.tick() and gw.deliveries(sid, "send"), what="the reply once lifted"
            )
            gw.rt.gate.set_estop(True)  # a new stop is said again
            send(gw, sid, "again?")
            wait_until(lambda: len(runner_records(caplog, "drain.estop")) == 2, what="2nd stop")
            gw.rt.gate.set_estop(False)
    finally:
        task_postrun.disconnect(count_held)
    said = [r.getMessage() for r in caplog.records if r.name.startswith("celery")]
    assert [m for m in said if "estop" in m] == []


def test_a_fire_the_claim_refuses_is_logged_and_leaves_no_run(
    tmp_path: Path, redis_url: str, redis_ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 16: the refused fire's line sat after a ``return`` (``mypy --warn-unreachable``
    found it), so a fire admitted and then refused at the claim left no trace in the log.
    Here the heartbeat is paused between admission and the turn's claim."""
    caplog.set_level(logging.INFO, logger="hbgw.runner")
    with fire_path_gateway(tmp_path, redis_url, redis_ns) as (gw, path):
        sid = gw.session()
        gw.due_now(sid)
        due = path.due_ms(sid)
        hold = threading.Event()
        path.runner.executor.submit(hold.wait, 30)  # the only turn thread waits
        assert path.runner.accept_fire(sid, due) == "accepted"
        gw.store.heartbeats.pause_heartbeat(sid, utcnow())
        hold.set()
        path.wait_idle()
        assert gw.runs(sid) == []
    [line] = runner_records(caplog, "fire.refused")
    assert (line.session, line.fire_id) == (sid, fire_id(sid, due))  # type: ignore[attr-defined]
    assert "inactive" in line.getMessage()
