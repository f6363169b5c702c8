"""Assemble one gateway worker: Celery app, runtime, turn runner, registry heartbeat."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hbgw.celery_app import make_celery
from hbgw.settings import Settings
from workers.dispatch import Dispatcher
from workers.ownership import RegistryHeartbeat
from workers.runner import TurnRunner
from workers.runtime import Runtime, resolve_redis_url


@dataclass(frozen=True)
class WorkerParts:
    app: Any
    rt: Runtime
    runner: TurnRunner

    @property
    def queue(self) -> str:
        return self.rt.keys.worker_queue(self.rt.worker)


@contextmanager
def assembled_worker(settings: Settings, name: str, *, threads: int) -> Iterator[WorkerParts]:
    """Registered as live while inside; on exit it deregisters and waits for running turns."""
    app = make_celery(settings, resolve_redis_url(settings))
    rt = Runtime.from_settings(settings, worker=name, with_turns=True)
    runner = TurnRunner(rt, Dispatcher(app, rt.keys), threads=threads)
    app.hbgw_runner = runner
    refresh_every = max(settings.worker_ttl / 4, 0.2)
    registry = RegistryHeartbeat(rt.registry, name, rt.now_ms, every=refresh_every)
    registry.start()
    try:
        yield WorkerParts(app, rt, runner)
    finally:
        registry.stop()
        runner.shutdown(wait=True)
        rt.close()
