"""Throughput with +150 ms of Redis latency each way, against the same deployment without it.

Issue 16: +150 ms of Redis latency each way (a far Redis, a slow link) costs at most half the
throughput. Two deployments of ours on PostgreSQL as the e2e benchmark runs them (one beat,
two workers, echo agent, file channel; bench/e2e_systems.py), side by side in one run: one
talks to Redis directly, the other's beat and workers (state and broker: one Redis) through a
delay line that holds every chunk ``DELAY_S`` in each direction (bench/latency_proxy.py), so a
round trip costs 300 ms more; a third has only its workers behind it (beat beside Redis), which
separates the turn path's share of the cost from beat's; a fourth is the second with
Celery's task events off (HBGW_TASK_EVENTS=false), a PUBLISH each in the consumer's one thread.
Rates interleaved, each phase as
e2e's (bench/e2e.py): delivered fires a second in a steady window, lag, CPU per fire.
Throughput is the most delivered at any offered rate; the goal's ratio is the delayed
deployment's over the direct one's.

Each session fires every ``INTERVAL_S`` (10 s; ``rate`` × 10 sessions): behind the line one
fire's own path is a chain of dependent round trips (claim, publish, the consumer's take,
admission, the lock, the confirmation, the finish: 2-3 s at 300 ms each), and with the e2e
benchmark's 1 s interval that chain, not the deployment, capped each session's rate — the run
measured one fire's latency (its lag says that) instead of the throughput. Runs before
2026-12-04 used 1 s (``redis_latency-20261203T*``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from bench import e2e_systems
from bench.context import BenchContext, Result
from bench.e2e import Plan, Systems, run_phases
from bench.e2e_systems import Ours
from bench.latency_proxy import HOST, DelayProxy

NAME = "redis_latency"
DELAY_S = 0.15
GOAL_RATIO = 0.5
DIRECT = "direct"
DELAYED = "+150ms"
WORKERS_ONLY = "+150ms-workers-only"  # beat near Redis: the turn path's own share of the cost
# Celery's task events are a PUBLISH each in the consumer's one thread (HBGW_TASK_EVENTS).
NO_EVENTS = "+150ms-no-task-events"
# Beat near Redis ticks fast and would send the slow consumers a small message each tick: the
# hold (HBGW_BEAT_HOLD, beat/held_fires.py) off, to show what it does.
WORKERS_ONLY_NO_HOLD = "+150ms-workers-only-no-hold"
REDIS_DB = {DIRECT: 6, DELAYED: 7, WORKERS_ONLY: 8, NO_EVENTS: 9, WORKERS_ONLY_NO_HOLD: 10}
INTERVAL_S = 10


def plan_for(ctx: BenchContext) -> Plan:
    if ctx.quick:
        return Plan([50], ["postgresql" if ctx.pg_url else "sqlite"], 4.0, 6.0, 120.0, INTERVAL_S)
    # Behind the delay line the first fires start about 20 s after their due time (new pooled
    # connections, 4-5 round trips each; beat's first ticks): the window waits for the steady
    # state, as a minute-long run found it.
    kinds = ["postgresql" if ctx.pg_url else "sqlite"]
    return Plan([100, 200], kinds, 25.0, 15.0, 720.0, INTERVAL_S)


@contextmanager
def delayed(
    ctx: BenchContext,
    kind: str,
    delay_s: float,
    roles: tuple[str, ...] = ("beat", "worker"),
    *,
    name: str = DELAYED,
    task_events: bool = True,
    beat_hold: float | None = None,
) -> Iterator[Ours]:
    upstream = urlsplit(ctx.redis_url)
    proxy = DelayProxy(upstream.port or 6379, delay_s)
    port = proxy.start()

    def via(url: str) -> str:  # the password and database kept
        parts = urlsplit(url)
        auth = parts.netloc.rpartition("@")[0]
        return parts._replace(netloc=f"{auth}@{HOST}:{port}" if auth else f"{HOST}:{port}").geturl()

    try:
        with e2e_systems.ours(
            ctx,
            kind,
            redis_db=REDIS_DB[name],
            via=via,
            via_roles=roles,
            task_events=task_events,
            beat_hold=beat_hold,
        ) as d:
            yield d
    finally:
        proxy.stop()


def systems(ctx: BenchContext, kind: str, delay_s: float) -> Systems:
    return {
        DIRECT: lambda: e2e_systems.ours(ctx, kind, redis_db=REDIS_DB[DIRECT]),
        DELAYED: lambda: delayed(ctx, kind, delay_s),
        WORKERS_ONLY: lambda: delayed(ctx, kind, delay_s, ("worker",), name=WORKERS_ONLY),
        WORKERS_ONLY_NO_HOLD: lambda: delayed(
            ctx, kind, delay_s, ("worker",), name=WORKERS_ONLY_NO_HOLD, beat_hold=0
        ),
        NO_EVENTS: lambda: delayed(ctx, kind, delay_s, name=NO_EVENTS, task_events=False),
    }


def summary(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The most delivered per deployment, the delayed one's over the direct one's (the goal's
    ratio), and each delayed one's ratio at each offered rate."""
    best = {
        name: max((p["delivered_per_s"] for p in phases), default=None)
        for name, phases in results.items()
    }
    direct = {p["offered_per_s"]: p["delivered_per_s"] for p in results.get(DIRECT, [])}
    by_rate = {
        name: {
            str(p["offered_per_s"]): round(p["delivered_per_s"] / direct[p["offered_per_s"]], 3)
            for p in results.get(name, [])
            if direct.get(p["offered_per_s"])
        }
        for name in results
        if name != DIRECT
    }
    with_delay, without = best.get(DELAYED), best.get(DIRECT)
    ratio = round(with_delay / without, 3) if with_delay and without else None
    workers_only, no_events = best.get(WORKERS_ONLY), best.get(NO_EVENTS)
    no_hold = best.get(WORKERS_ONLY_NO_HOLD)
    return {
        "throughput_per_s": best,
        "ratio": ratio,
        "workers_only_ratio": round(workers_only / without, 3)
        if workers_only and without
        else None,
        "no_task_events_ratio": round(no_events / without, 3) if no_events and without else None,
        "workers_only_no_hold_ratio": round(no_hold / without, 3) if no_hold and without else None,
        "ratio_at_offered": by_rate,
    }


def run(ctx: BenchContext) -> Result:
    plan = plan_for(ctx)
    kind = plan.kinds[0]
    results = run_phases(ctx, plan, systems(ctx, kind, DELAY_S))
    out = summary(results)
    print(
        f"  redis_latency: throughput {out['throughput_per_s']} -> ratio {out['ratio']}x "
        f"(goal >= {GOAL_RATIO})",
        flush=True,
    )
    return {
        "parameters": {
            "delay_s_each_way": DELAY_S,
            "database": kind,
            "rates": plan.rates,
            "interval_s": plan.interval_s,
            "warmup_s": plan.warmup_s,
            "window_s": plan.window_s,
            "workers": 2,
            "beats": 1,
        },
        "systems": results,
        "goal_ratio": GOAL_RATIO,
        **out,
    }
