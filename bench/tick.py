"""Cost of one beat tick with 1,000 due among 1k, 100k and 1M scheduled, restore included.

The fleet is in SQL (SQLite in the scratch dir) and in Redis, as a running deployment has it.
Each repetition makes the same 1,000 sessions due again, then times ``BeatCore.tick()``:
(a) with a step of the restore pass (a regular sweep made due: one page of
``HBGW_RESTORE_PAGE`` rows, as every tick of a large fleet's sweep has), (b) without it. The
liveness reconcile and the backlog gauge are pushed out of both: they run on their own timers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bench.beat_rig import BeatRig, beat_rig, rig_settings
from bench.context import BenchContext, Result
from bench.fleet import Fleet, build_fleet
from bench.stats import summary

NAME = "tick"

DUE = 1_000
REPS = 5
# Safety bounds (a restore pass that grew with the fleet again would show here, not hang the
# run): repetitions stop once they took this long, and a size where the last size's restore
# tick, scaled linearly, passes RESTORE_SKIP_S is skipped with a note.
RESTORE_BUDGET_S = {"quick": 8.0, "full": 30.0}
RESTORE_SKIP_S = {"quick": 8.0, "full": 60.0}
NEVER = 2**62


def tick_once(rig: BeatRig, fleet: Fleet, *, restore: bool) -> float:
    """Make the fleet's due sessions due again, run one tick, return its seconds."""
    core = rig.core
    rig.register_workers()  # a long setup may have outlived the worker TTL
    rig.rt.index.schedule_many(dict.fromkeys(fleet.due_ids, fleet.due_ms))
    restore_due_at(rig, 0 if restore else NEVER)
    core.next_reconcile_ms = NEVER
    core.next_backlog_ms = NEVER
    started = time.perf_counter()
    core.tick()
    elapsed = time.perf_counter() - started
    left = sum(rig.rt.index.backlog(rig.rt.now_ms()).values())
    rig.purge_broker()
    if left:
        raise RuntimeError(f"the tick left {left} of {len(fleet.due_ids)} due heartbeats")
    return elapsed


def restore_due_at(rig: BeatRig, next_ms: int) -> None:
    """Between sweeps, with an epoch (Redis has not lost its data): the next regular sweep may
    start at ``next_ms``."""
    key = rig.rt.keys.restore_sweep()
    pipe = rig.client.pipeline(transaction=True)
    pipe.hdel(key, "phase", "cursor", "started", "steps")
    pipe.hset(key, mapping={"epoch": rig.rt.now_ms(), "next": next_ms, "last": 1})
    pipe.execute()


def repeat(measure: Callable[[], float], reps: int, budget_s: float) -> list[float]:
    """Up to ``reps`` measurements, fewer once they took ``budget_s`` in all (at least one)."""
    values: list[float] = []
    while len(values) < reps and sum(values) < budget_s:
        values.append(measure())
    return values


def measure_size(
    rig: BeatRig, size: int, *, restore_budget_s: float, skip_restore: bool, reps: int = REPS
) -> dict[str, Any]:
    rig.client.flushdb()
    workers = rig.register_workers()
    began = time.perf_counter()
    fleet = build_fleet(rig, size, min(DUE, size), datetime.now(UTC))
    out: dict[str, Any] = {
        "scheduled": size,
        "due": len(fleet.due_ids),
        "workers": len(workers),
        "setup_s": round(time.perf_counter() - began, 2),
        "without_restore_s": summary(
            repeat(lambda: tick_once(rig, fleet, restore=False), reps, restore_budget_s)
        ),
    }
    if skip_restore:
        out["with_restore_s"] = summary([])
    else:
        out["with_restore_s"] = summary(
            repeat(lambda: tick_once(rig, fleet, restore=True), reps, restore_budget_s)
        )
    return out


def run(ctx: BenchContext) -> Result:
    sizes = ctx.sizes([1_000, 100_000], [1_000, 100_000, 1_000_000])
    budget, skip_over = RESTORE_BUDGET_S[ctx.profile], RESTORE_SKIP_S[ctx.profile]
    results: list[dict[str, Any]] = []
    for size in sizes:
        # A fresh SQLite file per size: the fleet is inserted once.
        settings = rig_settings(ctx.work_dir, ctx.redis_url, f"btick{size}")
        skip = _restore_too_slow(results, size, skip_over)
        if skip:
            ctx.note(
                f"tick: restore-included tick at {size:,} not measured: the last size's, scaled "
                f"linearly, is {skip:.0f} s (> {skip_over:.0f} s budget) — an extrapolation"
            )
        with beat_rig(settings) as rig:
            results.append(
                measure_size(rig, size, restore_budget_s=budget, skip_restore=bool(skip))
            )
        rig.client.flushdb()
    return {"due": DUE, "sizes": results, "ratios": _ratios(results)}


def _restore_too_slow(results: list[dict[str, Any]], size: int, budget: float) -> float:
    """The restore tick at ``size`` guessed from the last size's, when above ``budget``.

    What the restore pass adds to a tick (with minus without) is scaled linearly with the
    fleet: right for a pass that reads every heartbeat, pessimistic for a paged one.
    """
    if not results or results[-1]["with_restore_s"]["median"] is None:
        return 0.0
    last = results[-1]
    plain = float(last["without_restore_s"]["median"])
    extra = max(float(last["with_restore_s"]["median"]) - plain, 0.0)
    guess = plain + extra * size / last["scheduled"]
    return guess if guess > budget else 0.0


def _ratios(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Largest size over smallest, per kind of tick (the goal: ≤ 1.5 at 1M / 1k)."""
    out: dict[str, Any] = {}
    if len(results) < 2:
        return out
    small, large = results[0], results[-1]
    out["sizes"] = [small["scheduled"], large["scheduled"]]
    for kind in ("without_restore_s", "with_restore_s"):
        a, b = small[kind]["median"], large[kind]["median"]
        out[kind] = round(b / a, 2) if a and b else None
    return out
