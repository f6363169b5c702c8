"""Beat replicas: claimed fires per second and per beat CPU-second of 1, 2 and 4 beat processes.

N heartbeats are all due (quick 20k, full 200k). Each replica is a separate process (spawn)
running real BeatCore ticks with a real Dispatcher publishing to the Redis broker through the
project's Celery app; they register, meet at a barrier while the index is seeded, then tick
until all N are claimed. Every fire published is then read back off the broker queues: each
session must have been published exactly once (``exactly_once`` in the JSON). One unmeasured
round of every replica comes first, so no measured round pays a process's first publishes.

Replicas split the due shards by ``hbgw/state/beat_registry.py``'s balanced assignment of their
names (fixed names, so the split is the same in every repetition and recorded, with its
``shard_balance``: fewest shards per beat over most). Per round:

- ``fires_per_s``: N over the wall time from the first replica's start to the last claim. On
  this 2-core machine four busy beats and Redis cannot all run at once, so it flattens there.
- ``beat_cpu_s``: the CPU seconds of every beat process summed (``time.process_time`` in each:
  user + system, all its threads); ``fires_per_beat_cpu_s_total`` is N over that sum — the CPU
  each fire costs, which more beats cannot lower, only raise (the split's overhead).
- ``fires_per_beat_cpu_s``: N over the busiest beat's CPU seconds — the claimed fires per
  CPU-second of a beat when the beats run side by side, each on a core of its own: the round
  ends when the busiest is done. The issue's goal compares it at 4 beats and at 1; an uneven
  split shows here, as the busiest beat's share.

``cores_busy`` (beats' and Redis' CPU over the wall time: near the core count means the machine
is the limit) and ``redis_bound_fires_per_s`` (N over Redis' CPU: its single thread's
ceiling) say what limits the total.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from bench.broker import take_fires
from bench.context import BenchContext
from bench.replica_child import Round, beat_replica
from bench.stats import summary
from hbgw.celery_app import make_celery
from hbgw.core.settings import Settings
from hbgw.sessions.store import Store
from hbgw.state.beat_registry import shard_balance
from hbgw.state.keys import Keys
from hbgw.state.ownership import WorkerRegistry

NAME = "replicas"
COUNTS = (1, 2, 4)
WORKERS = ("w1", "w2", "w3", "w4")
REPS = 3
NAMESPACE = "bench-replicas"
SEED_CHUNK = 50_000
WARM_UP_FIRES = 20_000


def _settings(redis_url: str, work_dir: Path, namespace: str, shards: int | None) -> dict[str, Any]:
    # Restore and reconcile once per process (the warm-up tick), never inside a measured round.
    # One SQLite file, migrated once by the parent; the replicas only read it (empty) at warm-up.
    chosen = {} if shards is None else {"due_shards": shards}
    return chosen | {
        "home": str(work_dir),
        "database_url": f"sqlite:///{work_dir / 'replicas.sqlite3'}",
        "redis_url": redis_url,
        "namespace": namespace,
        "restore_interval": 3600,
        "reconcile_interval": 3600,
        "log_level": "WARNING",
        # Claim and publish is what is measured; no consumer takes the messages, so a hold for
        # a busy queue (beat/held_fires.py) would keep every tick's fires after the first.
        "beat_hold": 0,
    }


def _clear(client: redis.Redis, keys: Keys) -> None:
    stale = list(client.scan_iter(match=keys.match_all(), count=1000))
    for start in range(0, len(stale), 1000):
        client.unlink(*stale[start : start + 1000])


def _seed(client: redis.Redis, settings: Settings, n: int) -> list[str]:
    from hbgw.state.due_index import DueIndex

    keys = Keys(settings.namespace)
    index = DueIndex(client, keys, settings.due_shards)
    now_ms = int(time.time() * 1000)
    sids = [f"s{i:015x}" for i in range(n)]
    for start in range(0, n, SEED_CHUNK):
        index.schedule_many(dict.fromkeys(sids[start : start + SEED_CHUNK], now_ms - 1000))
    registry = WorkerRegistry(client, keys, ttl_ms=int(settings.worker_ttl * 1000))
    for worker in WORKERS:
        registry.refresh(worker, now_ms + 3_600_000)  # live for the whole round
    return sids


def published_fires(app: Any, keys: Keys) -> Counter[str]:
    """Sessions of every fire waiting on the workers' queues, read (and removed) via kombu."""
    fired: Counter[str] = Counter()
    for worker in WORKERS:
        fired.update(sid for sid, _due in take_fires(app, keys.worker_queue(worker)))
    return fired


def _redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _one_round(rig: dict[str, Any], replicas: int, n: int) -> dict[str, Any]:
    client, settings, keys = rig["client"], rig["settings"], rig["keys"]
    _clear(client, keys)
    for commands in rig["commands"][:replicas]:
        commands.put(Round(replicas, n))
    sids = _seed(client, settings, n)
    cpu0 = _redis_cpu(client)
    rig["barriers"][replicas].wait()
    reports = [rig["results"].get(timeout=600) for _ in range(replicas)]
    redis_cpu = _redis_cpu(client) - cpu0
    elapsed = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    fired = published_fires(rig["app"], keys)
    exactly_once = set(fired) == set(sids) and all(c == 1 for c in fired.values())
    beat_cpu = sum(r["cpu_s"] for r in reports)
    busiest_cpu = max(r["cpu_s"] for r in reports)
    owned = [list(r["own_shards"]) for r in reports]
    every_shard_once = sorted(s for shards in owned for s in shards) == list(
        range(settings.due_shards)
    )
    return {
        "replicas": replicas,
        "n": n,
        "seconds": round(elapsed, 4),
        "fires_per_s": _rate(n, elapsed),
        "exactly_once": exactly_once,
        "published": sum(fired.values()),
        "duplicates": sum(c - 1 for c in fired.values() if c > 1),
        "missing": len(set(sids) - set(fired)),
        "redis_cpu_s": round(redis_cpu, 3),
        "beat_cpu_s": round(beat_cpu, 3),
        "busiest_beat_cpu_s": round(busiest_cpu, 3),
        "fires_per_beat_cpu_s": _rate(n, busiest_cpu),
        "fires_per_beat_cpu_s_total": _rate(n, beat_cpu),
        # Cores kept busy by the beats and Redis together: near 2 on this machine = CPU-bound.
        "cores_busy": round((beat_cpu + redis_cpu) / elapsed, 2) if elapsed > 0 else None,
        # A projection, not a measurement: the rate Redis' one thread allows.
        "redis_bound_fires_per_s": _rate(n, redis_cpu),
        "every_shard_owned_once": every_shard_once,
        "shard_balance": shard_balance([len(shards) for shards in owned]),
        "beats": [
            {
                k: r[k]
                for k in (
                    "name",
                    "own_shards",
                    "claimed",
                    "ticks",
                    "cpu_s",
                    "cpu_s_waiting_included",
                )
            }
            | {"seconds": round(r["end"] - r["start"], 4)}
            for r in sorted(reports, key=lambda r: str(r["name"]))
        ],
    }


def _rate(count: int, seconds: float) -> float | None:
    return round(count / seconds, 1) if seconds > 0 else None


def measure_replicas(
    redis_url: str,
    work_dir: Path,
    n: int,
    *,
    counts: Sequence[int] = COUNTS,
    reps: int = REPS,
    namespace: str = NAMESPACE,
    shards: int | None = None,
) -> dict[str, Any]:
    """Every repetition of every replica count (interleaved), and the summaries; ``shards``:
    the due-index shard count (default: the setting's default)."""
    values = _settings(redis_url, work_dir, namespace, shards)
    settings = Settings(**values)
    Store.from_url(settings.effective_database_url).close()  # migrated before the replicas open it
    spawn = multiprocessing.get_context("spawn")
    most = max(counts)
    rig: dict[str, Any] = {
        "settings": settings,
        "keys": Keys(namespace),
        "client": redis.Redis.from_url(redis_url, decode_responses=True),
        "app": make_celery(settings, redis_url),
        "commands": [spawn.Queue() for _ in range(most)],
        "results": spawn.Queue(),
        "barriers": {k: spawn.Barrier(k + 1) for k in counts},
    }
    procs = []
    for i in range(most):
        args = (values, f"bench-beat-{i}", rig["commands"][i], rig["results"], rig["barriers"])
        procs.append(spawn.Process(target=beat_replica, args=args, daemon=True))
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            rig["results"].get(timeout=120)  # every replica warmed up
        # One unmeasured round of every replica: a process's first claims and publishes cost
        # 2-4x per fire (Celery's producer and queue declarations, first-run code paths), and
        # the warm-up tick claims nothing, so that fell on the first round each beat was in.
        _one_round(rig, most, min(n, WARM_UP_FIRES))
        rounds = [_one_round(rig, k, n) for _ in range(reps) for k in counts]
    finally:
        for commands in rig["commands"]:
            commands.put(None)
        for proc in procs:
            proc.join(timeout=30)
        _clear(rig["client"], rig["keys"])
        rig["client"].close()
    return _summarise(rounds, counts, n) | {"due_shards": settings.due_shards}


def _summarise(rounds: list[dict[str, Any]], counts: Sequence[int], n: int) -> dict[str, Any]:
    by_count: dict[str, Any] = {}
    for k in counts:
        mine = [r for r in rounds if r["replicas"] == k]
        split = [len(b["own_shards"]) for b in mine[0]["beats"]]
        by_count[str(k)] = {
            "fires_per_s": summary([r["fires_per_s"] for r in mine]),
            "seconds": summary([r["seconds"] for r in mine]),
            "redis_cpu_s": summary([r["redis_cpu_s"] for r in mine]),
            "beat_cpu_s_total": summary([r["beat_cpu_s"] for r in mine]),
            "fires_per_beat_cpu_s": summary([r["fires_per_beat_cpu_s"] for r in mine]),
            "fires_per_beat_cpu_s_total": summary([r["fires_per_beat_cpu_s_total"] for r in mine]),
            "cores_busy": summary([r["cores_busy"] for r in mine]),
            "shards_per_beat": split,
            "shard_balance": min(r["shard_balance"] for r in mine),
            # The most this split allows over one beat: the busiest beat has the most shards.
            "balance_bound": round(sum(split) / max(split), 2),
        }
    lo, hi = str(min(counts)), str(max(counts))
    return {
        "n": n,
        "counts": list(counts),
        "workers": len(WORKERS),
        "exactly_once": all(r["exactly_once"] for r in rounds),
        "every_shard_owned_once": all(r["every_shard_owned_once"] for r in rounds),
        "by_replicas": by_count,
        f"ratio_{hi}_over_{lo}": _ratio(by_count, "fires_per_s", hi, lo),
        f"cpu_ratio_{hi}_over_{lo}": _ratio(by_count, "fires_per_beat_cpu_s", hi, lo),
        "shard_balance": min(v["shard_balance"] for v in by_count.values()),
        "goal_cpu_ratio_4_over_1": 3.0,
        "goal_shard_balance": 0.8,
        "rounds": rounds,
        "cpu_count": multiprocessing.cpu_count(),
        "median_round_s": round(statistics.median(r["seconds"] for r in rounds), 4),
    }


def _ratio(by_count: dict[str, Any], figure: str, hi: str, lo: str) -> float | None:
    top, base = by_count[hi][figure]["median"], by_count[lo][figure]["median"]
    return round(top / base, 3) if top and base else None


def run(ctx: BenchContext) -> dict[str, Any]:
    n = 20_000 if ctx.quick else 200_000
    shards = Settings.model_fields["due_shards"].default
    ctx.note(
        f"{n} heartbeats all due over {shards} shards (the default HBGW_DUE_SHARDS); replicas "
        "are spawned processes with fixed names (bench-beat-0..3), so the balanced split of "
        "shards is the same every round"
    )
    ctx.note(
        "the machine has 2 cores: 4 replicas share them with Redis and each other, so the "
        "total fires/s flattens; fires_per_beat_cpu_s (N over the busiest beat's CPU seconds) "
        "is the rate with a core per beat"
    )
    return measure_replicas(ctx.redis_url, ctx.work_dir, n)
