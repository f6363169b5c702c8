"""Claim + publish throughput of one beat process, ours against celery-redbeat.

Ours: N heartbeats all due in the sharded index, four live workers registered; one pass of
beat's dispatch path — ``claim_all``, owner grouping (``group_by_owner``), one Celery message
per owner through the Dispatcher — timed phase by phase; fires/s = N / total. The broker queues
are purged between repetitions.

celery-redbeat: N ``RedBeatSchedulerEntry`` (interval schedule), all due, and
``RedBeatScheduler.tick()`` until every entry was sent (bounded in time; a partial run says so),
on the same Redis server (another key prefix) and the same Celery configuration.
"""

from __future__ import annotations

import time
from typing import Any

from bench import redbeat_setup
from bench.beat_rig import BeatRig, beat_rig, rig_settings, session_ids
from bench.context import BenchContext, Result
from bench.stats import summary
from hbgw.beat.core import group_by_owner

NAME = "claim"

REPS = 3
REDBEAT_PREFIX = "rb-claim"
# redbeat sends ~1k/s; at most this long per size, the rest is reported as a partial rate.
REDBEAT_BUDGET_S = 30.0
# Repetitions of one size, scaled from the last size's, must fit this (else one repetition).
SIZE_BUDGET_S = 60.0
# Populating the index costs about as much as claiming it.
SETUP_FACTOR = 2.0


def claim_once(rig: BeatRig, count: int, workers: list[str]) -> dict[str, float]:
    """Populate ``count`` due heartbeats, then one claim → group → publish pass, timed."""
    now_ms = rig.rt.now_ms()
    rig.populate(session_ids(count), now_ms - 1000)
    lease_ms, batch = rig.core.lease_ms, rig.settings.claim_batch
    t0 = time.perf_counter()
    claimed = rig.rt.index.claim_all(now_ms, lease_ms, batch)
    t1 = time.perf_counter()
    groups = group_by_owner(claimed, workers)
    t2 = time.perf_counter()
    for owner, fires in groups.items():
        rig.dispatcher.fires(owner, fires)
    t3 = time.perf_counter()
    if len(claimed) != count or sum(len(f) for f in groups.values()) != count:
        raise RuntimeError(f"claimed {len(claimed)} of {count} due heartbeats")
    total = t3 - t0
    return {
        "claim_s": t1 - t0,
        "group_s": t2 - t1,
        "publish_s": t3 - t2,
        "total_s": total,
        "fires_per_s": count / total,
        "messages": float(rig.queued_messages(workers)),
    }


def _reps(done: list[dict[str, Any]], count: int) -> int:
    if not done:
        return REPS
    last = done[-1]
    one = float(last["total_s"]["median"]) * count / last["scheduled"] * SETUP_FACTOR
    return REPS if one * REPS <= SIZE_BUDGET_S else 1


def measure_ours(rig: BeatRig, count: int, reps: int) -> dict[str, Any]:
    workers = rig.register_workers()
    runs = []
    for _ in range(reps):
        rig.client.flushdb()
        workers = rig.register_workers()
        runs.append(claim_once(rig, count, workers))
        rig.purge_broker()
    rig.client.flushdb()
    out: dict[str, Any] = {"scheduled": count, "workers": len(workers), "reps": runs}
    for phase in ("claim_s", "group_s", "publish_s", "total_s", "fires_per_s"):
        out[phase] = summary([r[phase] for r in runs])
    return out


def run(ctx: BenchContext) -> Result:
    ours_sizes = ctx.sizes([10_000], [10_000, 100_000, 1_000_000])
    redbeat_sizes = ctx.sizes([1_000], [1_000, 10_000])
    settings = rig_settings(ctx.work_dir, ctx.redis_url, "bclaim")
    ours: list[dict[str, Any]] = []
    with beat_rig(settings) as rig:
        for count in ours_sizes:
            ours.append(measure_ours(rig, count, _reps(ours, count)))
    redbeat = []
    app = redbeat_setup.make_app(ctx.redis_url, REDBEAT_PREFIX)
    try:
        for count in redbeat_sizes:
            redbeat.append(redbeat_setup.measure_sends(app, count, budget_s=REDBEAT_BUDGET_S))
            redbeat_setup.clear(app)
    finally:
        app.close()
    return {
        "ours": ours,
        "redbeat": redbeat,
        "ratios": _ratios(ours, redbeat),
        "settings": {"due_shards": settings.due_shards, "claim_batch": settings.claim_batch},
    }


def _ratios(ours: list[dict[str, Any]], redbeat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ours / redbeat per redbeat size, against ours at the nearest size (``same_size`` says)."""
    out = []
    for r in redbeat:
        if not ours or not r["sends_per_s"]:
            continue
        near = min(ours, key=lambda o: abs(o["scheduled"] - r["scheduled"]))
        out.append(
            {
                "redbeat_scheduled": r["scheduled"],
                "ours_scheduled": near["scheduled"],
                "same_size": near["scheduled"] == r["scheduled"],
                "ours_over_redbeat": round(near["fires_per_s"]["median"] / r["sends_per_s"], 1),
            }
        )
    return out
