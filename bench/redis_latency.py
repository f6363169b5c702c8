"""Throughput with +150 ms of Redis latency each way, against the same deployment without it.

Issue 16: +150 ms of Redis latency each way (a far Redis, a slow link) costs at most half the
throughput. Two deployments of ours on PostgreSQL as the e2e benchmark runs them (one beat,
two workers, echo agent, file channel; bench/e2e_systems.py), side by side in one run: one
talks to Redis directly, the other's beat and workers (state and broker: one Redis) through a
delay line that holds every chunk ``DELAY_S`` in each direction (bench/latency_proxy.py), so a
round trip costs 300 ms more. Rates interleaved, each phase as e2e's (bench/e2e.py): delivered
fires a second in a steady window, lag, CPU per fire. Throughput is the most delivered at any
offered rate; the ratio is the delayed deployment's over the direct one's.
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
REDIS_DB = {DIRECT: 6, DELAYED: 7}


def plan_for(ctx: BenchContext) -> Plan:
    if ctx.quick:
        return Plan([50], ["postgresql" if ctx.pg_url else "sqlite"], 4.0, 6.0, 120.0)
    # The delayed deployment's first fires wait on its slower start: a longer warm-up.
    return Plan([100, 200], ["postgresql" if ctx.pg_url else "sqlite"], 6.0, 10.0, 240.0)


@contextmanager
def delayed(ctx: BenchContext, kind: str, delay_s: float) -> Iterator[Ours]:
    upstream = urlsplit(ctx.redis_url)
    proxy = DelayProxy(upstream.port or 6379, delay_s)
    port = proxy.start()

    def via(url: str) -> str:
        return urlsplit(url)._replace(netloc=f"{HOST}:{port}").geturl()

    try:
        with e2e_systems.ours(ctx, kind, redis_db=REDIS_DB[DELAYED], via=via) as d:
            yield d
    finally:
        proxy.stop()


def systems(ctx: BenchContext, kind: str, delay_s: float) -> Systems:
    return {
        DIRECT: lambda: e2e_systems.ours(ctx, kind, redis_db=REDIS_DB[DIRECT]),
        DELAYED: lambda: delayed(ctx, kind, delay_s),
    }


def summary(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The most delivered per deployment, their ratio, and the ratio at each offered rate."""
    best = {
        name: max((p["delivered_per_s"] for p in phases), default=None)
        for name, phases in results.items()
    }
    direct = {p["offered_per_s"]: p["delivered_per_s"] for p in results.get(DIRECT, [])}
    by_rate = {
        str(p["offered_per_s"]): round(p["delivered_per_s"] / direct[p["offered_per_s"]], 3)
        for p in results.get(DELAYED, [])
        if direct.get(p["offered_per_s"])
    }
    with_delay, without = best.get(DELAYED), best.get(DIRECT)
    ratio = round(with_delay / without, 3) if with_delay and without else None
    return {"throughput_per_s": best, "ratio": ratio, "ratio_at_offered": by_rate}


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
            "warmup_s": plan.warmup_s,
            "window_s": plan.window_s,
            "workers": 2,
            "beats": 1,
        },
        "systems": results,
        "goal_ratio": GOAL_RATIO,
        **out,
    }
