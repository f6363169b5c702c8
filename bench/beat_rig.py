"""One beat process as the benchmarks drive it: settings, Runtime, Celery app, BeatCore.

Built like ``beat/scheduler.py`` builds beat (a Runtime, a Dispatcher over the project's
Celery app, a BeatCore), against the benchmark's private Redis and a SQLite file in the
scratch directory. Workers are registered by name only: the claim path groups by them and
publishes to their queues, which nobody consumes (the benchmarks purge them).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from hbgw.beat.core import BeatCore
from hbgw.celery_app import make_celery
from hbgw.core.settings import Settings
from hbgw.sessions.store import Store
from hbgw.state.connection import connect
from hbgw.state.dispatch import Dispatcher
from hbgw.state.runtime import Runtime

WORKERS = ("w1", "w2", "w3", "w4")
# Chunk of the pipelined index writes: bounds one pipeline's memory, not the round trips.
POPULATE_CHUNK = 100_000


@dataclass
class BeatRig:
    settings: Settings
    rt: Runtime
    app: Any
    dispatcher: Dispatcher
    core: BeatCore

    @property
    def client(self) -> redis.Redis:
        return self.rt.client

    def register_workers(self, names: Sequence[str] = WORKERS) -> list[str]:
        now_ms = self.rt.now_ms()
        for name in names:
            self.rt.registry.refresh(name, now_ms)
        return self.rt.registry.live(now_ms)

    def populate(self, session_ids: Sequence[str], due_ms: int) -> None:
        """Every session due at ``due_ms``: one pipelined ZADD per shard and chunk."""
        for start in range(0, len(session_ids), POPULATE_CHUNK):
            part = session_ids[start : start + POPULATE_CHUNK]
            self.rt.index.schedule_many(dict.fromkeys(part, due_ms))

    def purge_broker(self) -> int:
        """Drop every Celery key of this namespace (queues, bindings); returns how many."""
        pattern = f"{self.settings.namespace}:celery:*"
        stale = list(self.client.scan_iter(match=pattern, count=1000))
        for start in range(0, len(stale), 1000):
            self.client.unlink(*stale[start : start + 1000])
        return len(stale)

    def queued_messages(self, workers: Sequence[str]) -> int:
        """Messages waiting in the workers' queues (kombu keeps a queue as a Redis list)."""
        prefix = f"{self.settings.namespace}:celery:"
        pipe = self.client.pipeline(transaction=False)
        for name in workers:
            pipe.llen(prefix + self.rt.keys.worker_queue(name))
        return sum(int(n) for n in pipe.execute())


def session_ids(count: int, start: int = 0) -> list[str]:
    """Ids shaped like the store's (``s`` + 15 hex digits), deterministic."""
    return [f"s{i:015x}" for i in range(start, start + count)]


def rig_settings(work_dir: Path, redis_url: str, namespace: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "home": work_dir,
        "redis_url": redis_url,
        "namespace": namespace,
        "database_url": f"sqlite:///{work_dir / (namespace + '.sqlite3')}",
        # No consumer takes the rig's messages: beat's hold for a busy queue would keep the
        # fires of every tick after the first (beat/held_fires.py).
        "beat_hold": 0,
        **overrides,
    }
    return Settings(**values)


@contextmanager
def beat_rig(settings: Settings) -> Iterator[BeatRig]:
    url = settings.redis_url
    assert url is not None
    store = Store.from_url(settings.effective_database_url)
    rt = Runtime(settings=settings, store=store, client=connect(url), worker="beat")
    app = make_celery(settings, url)
    dispatcher = Dispatcher(app, rt.keys)
    try:
        yield BeatRig(settings, rt, app, dispatcher, BeatCore(rt, dispatcher))
    finally:
        rt.close()
        app.close()
