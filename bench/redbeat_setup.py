"""celery-redbeat as a user would run it, for the comparisons (claim, memory, end to end).

One ``RedBeatSchedulerEntry`` per session with an interval schedule; ``RedBeatScheduler.tick()``
sends what is due. The app is the project's own Celery app (``hbgw.celery_app.make_celery``:
same serializer, broker options, events) with redbeat's keys under ``prefix`` on the same Redis.

API: ``make_app(redis_url, prefix)``, ``populate(app, n, interval_s, due_now=True)``,
``scheduler(app)``, ``measure_sends(app, n, budget_s)``, ``clear(app)``, and the memory helpers
``flush_sync(client)``, ``used_memory(client)`` and ``entry_key_types(app, name)``.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any, cast

import redis
from celery.schedules import schedule as interval_schedule
from redbeat import RedBeatScheduler, RedBeatSchedulerEntry
from redbeat.decoder import RedBeatJSONEncoder
from redbeat.schedulers import ensure_conf, get_redis

from hbgw.celery_app import make_celery
from hbgw.core.settings import Settings

# A task name no worker consumes: the messages stay in the queue and are counted there.
TASK = "bench.redbeat_fire"
CHUNK = 5_000


def make_app(redis_url: str, prefix: str) -> Any:
    """The project's Celery app on ``redis_url``, redbeat's keys and queue under ``prefix``."""
    app = make_celery(Settings(redis_url=redis_url, namespace=prefix), redis_url)
    app.conf.update(
        redbeat_redis_url=redis_url,
        # Set explicitly: redbeat would otherwise hand the broker's transport options
        # (kombu's global_keyprefix) to its redis client, with a deprecation warning.
        redbeat_redis_options={},
        redbeat_key_prefix=f"{prefix}:redbeat:",  # redbeat's default is "redbeat:"
        # One scheduler process: no distributed lock (it is taken only by `celery beat`).
        redbeat_lock_key=None,
        beat_scheduler="redbeat.RedBeatScheduler",
    )
    app.conf["bench_prefix"] = prefix
    ensure_conf(app)  # app.redbeat_conf, read by the entries
    return app


def queue_name(app: Any) -> str:
    return f"{app.conf['bench_prefix']}.redbeat"


def entry_name(index: int) -> str:
    """The name of ``populate``'s entry number ``index``."""
    return f"hb-{index:015x}"


def _entry(app: Any, name: str, interval_s: float, last_run_at: datetime | None) -> Any:
    entry = RedBeatSchedulerEntry(
        name=name,
        task=TASK,
        schedule=interval_schedule(interval_s),
        args=[name],
        options={"queue": queue_name(app)},
        app=app,
    )
    entry.last_run_at = last_run_at
    return entry


def save_commands(pipe: Any, entry: Any) -> None:
    """What ``RedBeatSchedulerEntry.save()`` writes, into a caller's pipeline (same bytes)."""
    definition = {
        "name": entry.name,
        "task": entry.task,
        "args": entry.args,
        "kwargs": entry.kwargs,
        "options": entry.options,
        "schedule": entry.schedule,
        "enabled": entry.enabled,
    }
    meta = {"last_run_at": entry.last_run_at}
    pipe.hset(entry.key, "definition", json.dumps(definition, cls=RedBeatJSONEncoder))
    pipe.hsetnx(entry.key, "meta", json.dumps(meta, cls=RedBeatJSONEncoder))
    pipe.zadd(entry.app.redbeat_conf.schedule_key, {entry.key: entry.score})


def populate(app: Any, n: int, interval_s: float, due_now: bool = True) -> list[str]:
    """``n`` entries, due now (never run) or one interval from now; returns their names.

    ``entry.save()`` is one round trip per entry; the same writes are pipelined in chunks here
    so that a 100k setup takes seconds (tests check the bytes match ``save()``).
    """
    last_run_at = None if due_now else datetime.now(UTC)
    names = [entry_name(i) for i in range(n)]
    client = get_redis(app)
    for start in range(0, n, CHUNK):
        with client.pipeline(transaction=False) as pipe:
            for name in names[start : start + CHUNK]:
                save_commands(pipe, _entry(app, name, interval_s, last_run_at))
            pipe.execute()
    return names


def scheduler(app: Any) -> Any:
    return RedBeatScheduler(app, lock_key=None)


def queued(app: Any) -> int:
    """Messages redbeat has sent to its queue (kombu keeps a queue as a Redis list)."""
    client = _plain_client(app)
    try:
        return int(client.llen(f"{app.conf['bench_prefix']}:celery:{queue_name(app)}"))
    finally:
        client.close()


def measure_sends(app: Any, n: int, *, budget_s: float, interval_s: float = 3600) -> dict[str, Any]:
    """Populate ``n`` due entries, tick until all were sent or ``budget_s`` passed.

    The budget is checked between ticks: one ``tick()`` sends every entry due when it starts,
    so a single tick over a big schedule may run past it.
    """
    populate(app, n, interval_s, due_now=True)
    beat = scheduler(app)
    ticks, sent = 0, 0
    started = time.perf_counter()
    try:
        while sent < n and time.perf_counter() - started < budget_s:
            beat.tick()
            ticks += 1
            sent = queued(app)
    finally:
        elapsed = time.perf_counter() - started
        beat.close()
    rate = sent / elapsed if elapsed > 0 else 0.0
    out: dict[str, Any] = {
        "scheduled": n,
        "sent": sent,
        "ticks": ticks,
        "seconds": round(elapsed, 3),
        "sends_per_s": round(rate, 1),
        "complete": sent >= n,
    }
    if sent < n and rate:
        out["extrapolated_total_s"] = round(n / rate, 1)  # an extrapolation, labelled so
    return out


def clear(app: Any) -> int:
    """Remove redbeat's keys and the app's broker keys; returns how many were removed."""
    client = _plain_client(app)
    try:
        prefix = app.conf["bench_prefix"]
        stale = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        for start in range(0, len(stale), 1000):
            client.unlink(*stale[start : start + 1000])
        return len(stale)
    finally:
        client.close()


def flush_sync(client: redis.Redis) -> None:
    """FLUSHALL that returns once the memory is freed (a lazy-free server would still count it)."""
    cast(Any, client).execute_command("FLUSHALL", "SYNC")


def used_memory(client: redis.Redis, timeout_s: float = 60.0) -> int:
    """``INFO memory`` used_memory once no lazy free is pending (an earlier asynchronous flush
    frees in the background and would be counted against this measurement) and the allocator
    gave back what it could."""
    deadline = time.monotonic() + timeout_s
    while int(client.info("memory").get("lazyfree_pending_objects", 0)) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    client.memory_purge()
    return int(client.info("memory")["used_memory"])


def entry_key_types(app: Any, name: str) -> dict[str, str]:
    """The keys one entry occupies and their Redis types (its hash, and the shared ZSET)."""
    client = _plain_client(app)
    try:
        conf = app.redbeat_conf
        key = conf.key_prefix + name
        return {key: str(client.type(key)), conf.schedule_key: str(client.type(conf.schedule_key))}
    finally:
        client.close()


def _plain_client(app: Any) -> redis.Redis:
    return redis.Redis.from_url(app.conf["redbeat_redis_url"], decode_responses=True)
