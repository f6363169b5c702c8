"""Real `hbgw beat` and `hbgw worker` processes over one Redis and one SQL store."""

from __future__ import annotations

import signal
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from subprocess import Popen

import pytest
from support.harness import Gateway, gateway_settings, wait_until
from support.scenarios import check_gateway

from hbgw.core.clock import utcnow
from hbgw.procs import spawn_hbgw, stop_all
from hbgw.sessions.states import REACHED_AGENT, RunState
from hbgw.state.beat_registry import BeatRegistry
from hbgw.state.ownership import rendezvous_owner

# Real processes on a shared 2-core machine: allow more than the default per-test timeout.
pytestmark = pytest.mark.timeout(300)


@contextmanager
def processes(gw: Gateway, tmp_path: Path, *roles: list[str]) -> Iterator[list[Popen[bytes]]]:
    procs: list[Popen[bytes]] = []
    try:
        for i, args in enumerate(roles):
            procs.append(spawn_hbgw(args, env=gw.env(), log=tmp_path / f"proc{i}.log"))
        yield procs
    finally:
        stop_all(procs, timeout=20)


@pytest.fixture(params=["redis", "rabbitmq"])
def broker_url(request: pytest.FixtureRequest) -> str | None:
    """Celery's broker: the state Redis, or the local RabbitMQ (issue 19: the broker apart)."""
    if request.param == "redis":
        return None
    return str(request.getfixturevalue("amqp_url"))


def live(gw: Gateway) -> list[str]:
    return gw.rt.registry.live(gw.rt.now_ms())


def test_two_beats_never_fire_one_due_time_twice(
    tmp_path: Path, redis_url: str, redis_ns: str, broker_url: str | None
) -> None:
    settings = gateway_settings(tmp_path, redis_url, redis_ns, agent="echo", broker_url=broker_url)
    gw = Gateway(settings, redis_url)
    worker = ["worker", "--name", "w1", "--concurrency", "8"]
    beats = BeatRegistry(gw.rt.client, gw.rt.keys, ttl_ms=int(gw.settings.beat_ttl * 1000))
    with processes(gw, tmp_path, worker, ["beat"], ["beat"]):
        wait_until(lambda: live(gw) == ["w1"], 60, "the worker to register")
        # Two names, so the beats split the due shards between them.
        wait_until(lambda: len(beats.live(gw.rt.now_ms())) == 2, 60, "both beats to register")
        sessions = [gw.session(chat=f"C{i}") for i in range(40)]
        for sid in sessions:
            gw.due_now(sid, seconds=1)
        wait_until(lambda: len(gw.runs()) >= 300, 180, "hundreds of fires")
    runs = gw.runs()
    assert len({r.fire_id for r in runs}) == len(runs)
    by_session = defaultdict(list)
    for run in runs:
        if run.state in REACHED_AGENT:
            by_session[run.session_id].append(run.reserved_at)
    for sid, times in by_session.items():
        times.sort()
        gaps = [b - a for a, b in pairwise(times)]
        # One fire per due time: two fires of a 1 s heartbeat are never closer than 1 s.
        assert all(g >= timedelta(milliseconds=999) for g in gaps), (sid, min(gaps))
    report = check_gateway(gw, include_index=False)
    assert report.ok, report.to_json()
    gw.close()


def test_sigkill_worker_mid_turn_moves_its_sessions(
    tmp_path: Path, redis_url: str, redis_ns: str, broker_url: str | None
) -> None:
    fast = {"echo_delay": 3.0, "lock_lease": 2, "worker_ttl": 2, "broker_url": broker_url}
    settings = gateway_settings(tmp_path, redis_url, redis_ns, agent="echo", **fast)
    gw = Gateway(settings, redis_url)
    with processes(
        gw, tmp_path, ["worker", "--name", "w1"], ["worker", "--name", "w2"], ["beat"]
    ) as procs:
        wait_until(lambda: live(gw) == ["w1", "w2"], 60, "both workers to register")
        sessions = [gw.session(chat=f"C{i}") for i in range(12)]
        for sid in sessions:
            gw.due_now(sid, seconds=5)

        def started_on_w1() -> object:
            return next(
                (r for r in gw.runs() if r.worker == "w1" and r.state == RunState.STARTED), None
            )

        victim = wait_until(started_on_w1, 60, "a turn running on w1")
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        killed_at = utcnow()

        def moved() -> object:
            return [
                r
                for r in gw.runs(victim.session_id)
                if r.worker == "w2" and r.state == RunState.COMPLETED
            ]

        wait_until(moved, 90, "the victim's next fire to complete on w2")
        # A reservation the dead worker made but never started is given back by beat.
        stale_before = utcnow() - timedelta(seconds=settings.lock_lease)
        wait_until(
            lambda: (
                not [
                    r for r in gw.store.ledger.stale_reservations(stale_before) if r.worker == "w1"
                ]
            ),
            30,
            "beat to refund reservations orphaned by w1",
        )
    interrupted = next(r for r in gw.runs() if r.fire_id == victim.fire_id)
    # Reached the agent: counted once, never again; the next grant of its session settled it.
    assert (interrupted.state, interrupted.detail) == (RunState.FAILED, "lock lost before delivery")
    _assert_ownership_moved(gw, killed_at + timedelta(seconds=settings.worker_ttl + 1), killed_at)
    report = check_gateway(gw, include_index=False)
    assert report.ok, report.to_json()
    gw.close()


def _assert_ownership_moved(gw: Gateway, after_ttl: datetime, killed_at: datetime) -> None:
    """Turns before the kill ran on their rendezvous owner; after the TTL only on w2."""
    for run in gw.runs():
        if run.state not in REACHED_AGENT:
            continue
        if run.reserved_at < killed_at:
            assert run.worker == rendezvous_owner(run.session_id, ["w1", "w2"])
        elif run.reserved_at > after_ttl:
            assert run.worker == "w2"
