"""Turns one worker process holds at once against its memory, with a model that answers in 2 s.

A real model takes seconds; the worker's turns wait for it. One worker process (``hbgw worker
--turns T``) and beat run against a loopback endpoint that answers every call after
``MODEL_DELAY``; T sessions fall due at once. The endpoint counts the calls it holds at the same
time, and the worker's resident memory and threads are sampled while they run. The goal
(issue 16): >= 200 concurrent calls in one process, <= 300 MB resident.
"""

from __future__ import annotations

import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import psutil
import redis

from bench.context import BenchContext, Result
from bench.e2e_systems import postgres_schema, redis_db_url, seed_heartbeat
from bench.model_fake import Calls, serving
from hbgw.core.errors import HbgwError
from hbgw.core.settings import Settings
from hbgw.procs import settings_env, spawn_hbgw, stop_all
from hbgw.sessions.store import Store
from hbgw.state.connection import connect
from hbgw.state.runtime import Runtime

NAME = "inflight"
MODEL_DELAY = 2.0  # seconds a model call takes
INTERVAL_S = 3600  # each session fires once in the measurement
REDIS_DB = 5
GOAL_IN_FLIGHT = 200
GOAL_RSS_MB = 300
READY_TIMEOUT = 60.0
SAMPLE_EVERY = 0.1


@dataclass(frozen=True)
class Point:
    turns: int
    sessions: int
    most_in_flight: int
    rss_idle_mb: float
    rss_peak_mb: float
    threads_idle: int
    threads_peak: int
    seconds: float  # from the first due time to the last answer
    answered: int
    cpu_ms_per_turn: float  # the worker process's CPU (user + system) over the turns, per turn


def run(ctx: BenchContext) -> Result:
    return measure(ctx, ctx.sizes([8, 64, 256], [8, 64, 128, 256, 512]))


def measure(ctx: BenchContext, sizes: list[int], delay: float = MODEL_DELAY) -> Result:
    with serving(delay) as (url, calls):
        points = [_measure(ctx, url, calls, turns) for turns in sizes]
    best = max(points, key=lambda p: p.most_in_flight)
    return {
        "model_delay_s": delay,
        "database": "postgresql" if ctx.pg_url else "sqlite",
        "points": [vars(p) for p in points],
        "goal": {"in_flight": GOAL_IN_FLIGHT, "rss_mb": GOAL_RSS_MB},
        "met": best.most_in_flight >= GOAL_IN_FLIGHT and best.rss_peak_mb <= GOAL_RSS_MB,
    }


def _measure(ctx: BenchContext, model_url: str, calls: Calls, turns: int) -> Point:
    home = ctx.work_dir / f"inflight-{turns}-{uuid.uuid4().hex[:6]}"
    logs = home / "logs"
    logs.mkdir(parents=True)
    with ExitStack() as stack:
        if ctx.pg_url:
            db_url = postgres_schema(stack, ctx.pg_url)
        else:
            db_url = f"sqlite:///{home / 'bench.sqlite3'}"
        redis_url = redis_db_url(ctx.redis_url, REDIS_DB)
        redis.Redis.from_url(redis_url).flushdb()
        settings = Settings(
            home=home,
            database_url=db_url,
            redis_url=redis_url,
            namespace=f"inflight-{turns}",
            agent="openai",
            openai_base_url=model_url,
            openai_api_key="bench",
            openai_model="bench-model",
            openai_max_in_flight=turns,  # the bound out of the way: the process is measured
            channel="file",
            channel_file=home / "deliveries.jsonl",
            log_format="json",
        )
        env = settings_env(settings)
        env["HBGW_OPENAI_API_KEY"] = "bench"
        if spawn_hbgw(["migrate"], env=env, log=logs / "migrate.log").wait(120) != 0:
            raise HbgwError(f"`hbgw migrate` failed; see {logs / 'migrate.log'}.")
        worker = spawn_hbgw(
            ["worker", "--name", "w1", "--turns", str(turns)], env=env, log=logs / "w1.log"
        )
        beat = spawn_hbgw(["beat"], env=env, log=logs / "beat.log")
        stack.callback(lambda: stop_all([worker, beat]))
        rt = Runtime(settings, Store.from_url(db_url), connect(redis_url), worker="bench-edge")
        stack.callback(rt.close)
        _wait(lambda: bool(rt.registry.live(rt.now_ms())), worker, f"the worker (logs: {logs})")
        proc = psutil.Process(worker.pid)
        idle_rss, idle_threads = proc.memory_info().rss, proc.num_threads()
        cpu_before = _cpu_seconds(proc)
        done_before, calls.most = calls.done, 0
        first_due = _seed(rt, turns)
        point = _watch(proc, calls, done_before, turns, first_due, idle_rss, idle_threads)
        cpu_ms = (_cpu_seconds(proc) - cpu_before) * 1000 / turns
        return Point(**{**vars(point), "cpu_ms_per_turn": round(cpu_ms, 1)})
    raise AssertionError("unreachable")


def _seed(rt: Runtime, count: int) -> float:
    """``count`` sessions whose heartbeats all fall due at one moment, after the seeding."""
    first_due = time.time() + 1.0 + count * 0.01
    for i in range(count):
        seed_heartbeat(rt, f"c{i}", INTERVAL_S, first_due, prompt="anything new?")
    return first_due


def _watch(
    proc: psutil.Process,
    calls: Calls,
    done_before: int,
    expected: int,
    first_due: float,
    idle_rss: int,
    idle_threads: int,
) -> Point:
    # Each turn waits MODEL_DELAY; even one at a time they would end within this.
    deadline = first_due + READY_TIMEOUT + expected * MODEL_DELAY  # a bound, not a figure
    peak_rss, peak_threads = idle_rss, idle_threads
    while calls.done - done_before < expected:
        if time.time() > deadline:
            raise HbgwError(f"{calls.done - done_before} of {expected} turns answered in time.")
        info: Any = proc.memory_info()
        peak_rss = max(peak_rss, info.rss)
        peak_threads = max(peak_threads, proc.num_threads())
        time.sleep(SAMPLE_EVERY)
    return Point(
        turns=expected,
        sessions=expected,
        most_in_flight=calls.most,
        rss_idle_mb=round(idle_rss / 2**20, 1),
        rss_peak_mb=round(peak_rss / 2**20, 1),
        threads_idle=idle_threads,
        threads_peak=peak_threads,
        seconds=round(time.time() - first_due, 2),
        answered=calls.done - done_before,
        cpu_ms_per_turn=0.0,  # the caller's, once the turns are over
    )


def _cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def _wait(ready: Any, proc: Any, what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise HbgwError(f"{what} did not get ready.")
        time.sleep(0.1)
