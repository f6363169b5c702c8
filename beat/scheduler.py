"""Celery beat with our own Scheduler: `hbgw beat` runs it."""

from __future__ import annotations

from typing import Any

from celery.beat import Scheduler

from beat.core import BeatCore, safe_tick
from state.dispatch import Dispatcher, context_of
from state.runtime import Runtime


class HeartbeatScheduler(Scheduler):  # type: ignore[misc]
    """Replaces the static beat schedule with claims from the Redis due index."""

    def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
        settings = context_of(app).settings
        rt = Runtime.from_settings(settings, worker="beat")
        self.core = BeatCore(rt, Dispatcher(app, rt.keys))
        super().__init__(app, *args, **kwargs)

    def setup_schedule(self) -> None:
        self.core.restore_now(self.core.rt.now_ms())

    def tick(self, *args: Any, **kwargs: Any) -> float:
        return safe_tick(self.core)

    def sync(self) -> None:
        return None

    def close(self) -> None:
        self.core.rt.close()

    @property
    def info(self) -> str:
        return f"    . due index: redis, namespace {self.core.rt.settings.namespace}"
