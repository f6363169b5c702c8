"""Redis bytes per scheduled idle session with a heartbeat, ours against celery-redbeat.

Ours: what an idle scheduled session keeps in Redis — its due-index entry and what the restore
pass seeds (the fence counter; idle is not stored) — written by ``DueIndex.schedule_many`` and
``TurnGate.seed_many``, the same keys a finished turn leaves (the smoke test compares them).
celery-redbeat: one saved ``RedBeatSchedulerEntry`` per session (its hash and its member of the
schedule ZSET). Each: FLUSHALL, MEMORY PURGE, ``used_memory`` before and after, / N.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import redis

from bench import redbeat_setup
from bench.beat_rig import BeatRig, beat_rig, rig_settings, session_ids
from bench.context import BenchContext, Result
from bench.stats import summary
from hbgw.core.clock import to_ms

NAME = "memory"

REPS = 2
CHUNK = 20_000


def ours_bytes(rig: BeatRig, count: int) -> float:
    """Redis bytes per idle scheduled session, from an empty server."""
    client = rig.client
    redbeat_setup.flush_sync(client)
    before = redbeat_setup.used_memory(client)
    ids = session_ids(count)
    due = to_ms(datetime.now(UTC) + timedelta(hours=1))
    for start in range(0, count, CHUNK):
        part = ids[start : start + CHUNK]
        rig.rt.index.schedule_many(dict.fromkeys(part, due))
        rig.rt.gate.seed_many(dict.fromkeys(part, 0))
    after = redbeat_setup.used_memory(client)
    return (after - before) / count


def session_key_types(client: redis.Redis, rig: BeatRig, session_id: str) -> dict[str, str]:
    """Every key holding something of one session, and its type (the shard ZSET included)."""
    keys = rig.rt.keys
    found = sorted(client.scan_iter(match=f"{keys.namespace}:{{s:{session_id}}}:*", count=1000))
    out = {str(k): str(client.type(k)) for k in found}
    shard = rig.rt.index.shard_key(session_id)
    if client.zscore(shard, session_id) is not None:
        out[shard] = "zset (member)"
    return out


def redbeat_bytes(app: Any, client: redis.Redis, count: int) -> float:
    redbeat_setup.flush_sync(client)
    before = redbeat_setup.used_memory(client)
    redbeat_setup.populate(app, count, 3600, due_now=False)
    after = redbeat_setup.used_memory(client)
    return (after - before) / count


def run(ctx: BenchContext) -> Result:
    count = ctx.sizes([10_000], [100_000])[0]
    client = ctx.redis()
    settings = rig_settings(ctx.work_dir, ctx.redis_url, "bmem")
    with beat_rig(settings) as rig:
        ours = [ours_bytes(rig, count) for _ in range(REPS)]
        ours_keys = session_key_types(client, rig, session_ids(1)[0])
    app = redbeat_setup.make_app(ctx.redis_url, "rb-mem")
    try:
        theirs = [redbeat_bytes(app, client, count) for _ in range(REPS)]
        theirs_keys = redbeat_setup.entry_key_types(app, redbeat_setup.entry_name(0))
    finally:
        app.close()
    client.flushall()
    client.close()
    ratio = summary(theirs)["median"] / summary(ours)["median"]
    return {
        "sessions": count,
        "ours_bytes_per_session": summary(ours),
        "redbeat_bytes_per_session": summary(theirs),
        "redbeat_over_ours": round(ratio, 2),
        "ours_keys": ours_keys,
        "ours_not_counted": (
            "a finished turn also leaves an `idle` stamp in the shared <ns>:liveness hash; the "
            "reconciler removes it once it is older than HBGW_DEAD_AFTER"
        ),
        "redbeat_keys": theirs_keys,
        "due_shards": settings.due_shards,
    }
