"""One worker's fire path in-process, without Celery: admission on the test's thread, the turn
on the runner's single turn thread, on real Redis and real SQL — so a test can count what one
admission and one heartbeat turn cost in SQL round trips (``support.sql_count``) and in Redis
round trips of the worker's client (``support.redis_count``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hbgw.gateway.channels import make_channel
from hbgw.state.dispatch import Dispatcher
from hbgw.state.runtime import Runtime
from hbgw.workers.agents import make_agent
from hbgw.workers.runner import TurnRunner
from support.harness import Gateway, gateway_settings
from support.redis_count import RedisCount, RedisCounter
from support.sql_count import SqlCount, counting_sql

WORKER = "w1"


@dataclass(frozen=True)
class FireCost:
    """SQL and Redis spent by one fire: deciding to run it (admission) and running its turn."""

    admission: SqlCount
    turn: SqlCount
    admission_redis: RedisCount
    turn_redis: RedisCount


@dataclass(frozen=True)
class DrainCost:
    """SQL and Redis spent by a drain's user turns."""

    sql: SqlCount
    redis: RedisCount


class FirePath:
    def __init__(self, gw: Gateway, threads: int = 1, dispatcher: Dispatcher | None = None) -> None:
        self.gw = gw
        self.rt = Runtime.from_settings(gw.settings, worker=WORKER)
        self.redis = RedisCounter(self.rt.client)
        self.runner = TurnRunner(
            self.rt,
            dispatcher or gw.dispatcher,
            agent=make_agent(gw.settings),
            channel=make_channel(gw.settings),
            threads=threads,
        )
        self.rt.registry.refresh(WORKER, self.rt.now_ms())  # the only live worker: owns all

    def due_ms(self, sid: str) -> int:
        due = self.rt.index.due_ms(sid)
        assert due is not None, f"{sid} has no due entry"
        return due

    def fire(self, sid: str) -> FireCost:
        """One due fire of ``sid``, admission and turn counted apart."""
        due_ms = self.due_ms(sid)
        hold = threading.Event()
        # The only turn thread waits, so the admission is counted alone.
        self.runner.executor.submit(hold.wait, 30)
        with counting_sql(self.rt.store.engine) as admission, self.redis.counting() as trips:
            outcome = self.runner.accept_fire(sid, due_ms)
        assert outcome == "accepted", outcome
        with counting_sql(self.rt.store.engine) as turn, self.redis.counting() as turn_trips:
            hold.set()
            self.wait_idle()
        return FireCost(admission, turn, trips, turn_trips)

    def admit_batch(self, sids: list[str]) -> SqlCount:
        """One task's batch of due fires, admitted together while no turn can start; the SQL
        of the admission alone. The turns then run before this returns."""
        due = [(sid, self.due_ms(sid)) for sid in sids]
        hold = threading.Event()
        self.runner.executor.submit(hold.wait, 30)
        with counting_sql(self.rt.store.engine) as admission:
            outcomes = self.runner.accept_fires(due)
        assert set(outcomes) == {"accepted"}, outcomes
        hold.set()
        self.wait_idle()
        return admission

    def drain(self, sid: str) -> DrainCost:
        """The user turns of ``sid``'s queued messages, counted (the drain runs on the turn
        thread; the inbox in Redis was filled by the edge). ``w1`` is refreshed first: nothing
        else refreshes it in process, and a test slower than the worker TTL would see the drain
        forwarded to nobody."""
        self.rt.registry.refresh(WORKER, self.rt.now_ms())
        with counting_sql(self.rt.store.engine) as turn, self.redis.counting() as trips:
            outcome = self.runner.drain(sid)
            assert outcome == "accepted", outcome
            self.wait_idle()
        return DrainCost(turn, trips)

    def fires_per_second(self, sids: list[str]) -> float:
        """Admit every session's due fire and wait for all turns; fires per wall second."""
        due = [(sid, self.due_ms(sid)) for sid in sids]
        self.rt.registry.refresh(WORKER, self.rt.now_ms())
        started = time.perf_counter()
        outcomes = self.runner.accept_fires(due)
        self.wait_idle()
        elapsed = time.perf_counter() - started
        assert set(outcomes) == {"accepted"}, outcomes
        return len(sids) / elapsed

    def wait_idle(self) -> None:
        """Every turn submitted so far has run (the executor's queue is FIFO)."""
        # One waiter per thread, all waiting for each other: they can only all run once every
        # thread is free, so every earlier turn has ended.
        threads = self.runner.executor._max_workers
        barrier = threading.Barrier(threads)
        for future in [self.runner.executor.submit(barrier.wait, 60) for _ in range(threads)]:
            future.result(timeout=60)

    def close(self) -> None:
        self.runner.shutdown(wait=True)
        self.rt.registry.remove(WORKER)
        self.rt.close()


@contextmanager
def fire_path_gateway(
    tmp_path: Path, redis_url: str, namespace: str, **overrides: object
) -> Iterator[tuple[Gateway, FirePath]]:
    """A gateway whose one worker runs in-process with the echo agent; long leases, so a slow
    machine never turns a measurement into a lease expiry."""
    settings = gateway_settings(
        tmp_path,
        redis_url,
        namespace,
        agent="echo",
        lock_lease=60,
        worker_ttl=600,
        claim_lease=120,
        **overrides,
    )
    gw = Gateway(settings, redis_url)
    path = FirePath(gw)
    try:
        yield gw, path
    finally:
        path.close()
        gw.close()
