"""End to end: sustained fires per second and lag from due time to agent start, ours vs redbeat.

For each offered rate (sessions with a heartbeat every second: ``rate`` sessions), interleaved —
ours on SQLite, ours on PostgreSQL, then celery-redbeat, then the next rate — a fresh deployment
(one beat, two workers, bench/e2e_systems.py) runs the sessions; after a warm-up, a steady window
counts the fires that started in it (their rate is the delivered rate), their lag (HdrHistogram:
p50, p95, p99, max) and the CPU seconds per fire of beat and of the workers. A system that
delivers under half the offered rate is saturated: its higher rates are skipped (they would
only measure a growing backlog). The whole run has a time budget; a phase that would overrun
it is skipped with a note.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import asdict, dataclass
from typing import Any

from bench import e2e_systems
from bench.context import BenchContext, Result
from bench.e2e_measure import (
    delivered_rate,
    in_window,
    lag_summary,
    lags,
    per_fire,
    rate_where_p99_passes,
    ratio,
    steady_window,
)
from bench.e2e_systems import Deployment

NAME = "e2e"
INTERVAL_S = 1
SATURATED = 0.5  # delivered / offered below this: the system cannot keep up
P99_LIMIT_S = 1.0
SETTLE_S = 0.5  # after the window, before reading: a start in the window is written by then
STARTUP_ESTIMATE_S = 12.0  # migrate + three Python processes, for the budget check only
REDBEAT = "redbeat"

log = logging.getLogger("hbgw.bench.e2e")


@dataclass(frozen=True)
class Plan:
    rates: list[int]
    kinds: list[str]
    warmup_s: float
    window_s: float
    budget_s: float
    # Each session fires once an interval: with 1 s, a fire whose own path takes longer than a
    # second (behind a slow link) caps its session's rate, and the run measures that path's
    # latency rather than what the deployment can carry (bench/redis_latency.py uses 10 s).
    interval_s: int = INTERVAL_S


def plan_for(ctx: BenchContext) -> Plan:
    if ctx.quick:
        return Plan([10, 50], ["sqlite"], 3.0, 6.0, 120.0)
    kinds = ["sqlite", "postgresql"]
    if ctx.pg_url is None:
        ctx.note("e2e: PostgreSQL does not answer; ours runs on SQLite only")
        kinds = ["sqlite"]
    return Plan([10, 50, 100, 200, 500], kinds, 4.0, 10.0, 360.0)


def _sleep_until(epoch: float, d: Deployment) -> None:
    while (left := epoch - time.time()) > 0:
        d.check_alive()
        time.sleep(min(left, 0.5))


def measure_phase(d: Any, rate: int, plan: Plan) -> dict[str, Any]:
    """Seed ``rate`` sessions a second at one fire an interval each; measure the steady window."""
    sessions = rate * plan.interval_s
    seeded_at = time.time()
    first_due = d.seed(sessions, plan.interval_s)
    seed_s = time.time() - seeded_at
    # Seeding slower than planned (a loaded machine) leaves sessions due as they are made: they
    # fire at the seeding's pace, spread out, and the warm-up counts from the seeding's end.
    window = steady_window(max(first_due, seeded_at + seed_s), plan.warmup_s, plan.window_s)
    _sleep_until(window.start, d)
    cpu0 = d.cpu()
    _sleep_until(window.end, d)
    cpu1 = d.cpu()
    time.sleep(SETTLE_S)
    fires = in_window(d.fires(), window)
    n = len(fires)
    return {
        "offered_per_s": rate,
        "sessions": sessions,
        "interval_s": plan.interval_s,
        "seed_s": round(seed_s, 2),
        "window_s": plan.window_s,
        "fires": n,
        "delivered_per_s": round(delivered_rate(fires, window), 2),
        "lag_s": lag_summary(lags(fires)),
        "cpu_s_per_fire": {role: per_fire(cpu1[role] - cpu0[role], n) for role in cpu0},
        "cpu_s": {role: round(cpu1[role] - cpu0[role], 3) for role in cpu0},
        "pids": d.pids(),
        "loadavg_1m": round(os.getloadavg()[0], 2),  # other work on the machine, at the end
    }


Systems = dict[str, Callable[[], AbstractContextManager[Any]]]


def _systems(ctx: BenchContext, plan: Plan) -> Systems:
    out: Systems = {}
    for kind in plan.kinds:
        out[f"ours-{kind}"] = lambda kind=kind: e2e_systems.ours(ctx, kind)  # type: ignore[misc]
    out[REDBEAT] = lambda: e2e_systems.redbeat(ctx)
    return out


def run_phases(
    ctx: BenchContext, plan: Plan, systems: Systems | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Every rate on every system (ours on each kind and redbeat unless given), interleaved; a
    deployment is started at its first phase and kept (idle between its phases) until it
    saturates or has run its last rate: an idle deployment left running (three processes
    ticking) would load the phases of the systems after it."""
    systems = _systems(ctx, plan) if systems is None else systems
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
    began = time.monotonic()
    with ExitStack() as outer:
        running: dict[str, ExitStack] = {}
        deployments: dict[str, Any] = {}
        saturated: dict[str, int] = {}
        for rate in plan.rates:
            for name, start in systems.items():
                if name in saturated:
                    ctx.note(f"e2e: {name} at {rate}/s skipped: saturated at {saturated[name]}/s")
                    continue
                needed = plan.warmup_s + plan.window_s + rate * 0.02
                needed += 0 if name in running else STARTUP_ESTIMATE_S
                if time.monotonic() - began + needed > plan.budget_s:
                    ctx.note(f"e2e: {name} at {rate}/s skipped: over the {plan.budget_s:.0f} s")
                    continue
                if name not in running:
                    running[name] = outer.enter_context(ExitStack())
                    deployments[name] = running[name].enter_context(start())
                d = deployments[name]
                phase = measure_phase(d, rate, plan)
                d.retire()
                results[name].append(phase)
                print(_line(name, phase), flush=True)
                if phase["delivered_per_s"] < SATURATED * rate:
                    saturated[name] = rate
                    running.pop(name).close()  # its backlog must not load the others' phases
                elif rate == plan.rates[-1]:
                    running.pop(name).close()  # nothing left for it to run
    return results


def _line(name: str, p: dict[str, Any]) -> str:
    lag = p["lag_s"]
    cpu = p["cpu_s_per_fire"]
    return (
        f"  e2e {name:<16} offered {p['offered_per_s']:>4}/s delivered {p['delivered_per_s']:>7}/s"
        f"  lag p50 {lag['p50']} p95 {lag['p95']} p99 {lag['p99']} max {lag['max']} s"
        f"  cpu/fire beat {cpu['beat']} workers {cpu['workers']} s"
    )


def comparisons(results: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per rate and per store of ours: delivered and p99 lag, ours / redbeat."""
    theirs = {p["offered_per_s"]: p for p in results.get(REDBEAT, [])}
    out = []
    for name, phases in results.items():
        if name == REDBEAT:
            continue
        for p in phases:
            other = theirs.get(p["offered_per_s"])
            if other is None:
                continue
            out.append(
                {
                    "system": name,
                    "offered_per_s": p["offered_per_s"],
                    "delivered_ratio": ratio(p["delivered_per_s"], other["delivered_per_s"]),
                    "p99_lag_ratio": ratio(p["lag_s"]["p99"], other["lag_s"]["p99"]),
                    "cpu_per_fire_ratio": ratio(
                        _total_cpu(p["cpu_s_per_fire"]), _total_cpu(other["cpu_s_per_fire"])
                    ),
                }
            )
    return out


def _total_cpu(per_role: dict[str, float | None]) -> float | None:
    values = [v for v in per_role.values() if v is not None]
    return sum(values) if values else None


def run(ctx: BenchContext) -> Result:
    plan = plan_for(ctx)
    results = run_phases(ctx, plan)
    crossings = {
        name: rate_where_p99_passes(
            [(p["offered_per_s"], p["lag_s"]["p99"]) for p in phases], P99_LIMIT_S
        )
        for name, phases in results.items()
    }
    ratios = comparisons(results)
    for r in ratios:
        print(
            f"  e2e {r['system']} / redbeat at {r['offered_per_s']}/s: delivered "
            f"{r['delivered_ratio']}x, p99 lag {r['p99_lag_ratio']}x, "
            f"CPU per fire {r['cpu_per_fire_ratio']}x",
            flush=True,
        )
    return {
        "parameters": asdict(plan) | {"workers": 2, "beats": 1},
        "systems": results,
        "p99_passes_1s_at_offered": crossings,
        "ratios_ours_over_redbeat": ratios,
    }
