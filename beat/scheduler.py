"""Celery beat with our own Scheduler: `hbgw beat` runs it."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from celery.beat import Scheduler

from hbgw.beat.core import BeatCore, safe_tick
from hbgw.state.connection import TRANSIENT_REDIS_ERRORS
from hbgw.state.dispatch import Dispatcher, context_of
from hbgw.state.runtime import Runtime

log = logging.getLogger("hbgw.beat")


class HeartbeatScheduler(Scheduler):  # type: ignore[misc]
    """Replaces the static beat schedule with claims from the Redis due index."""

    def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
        settings = context_of(app).settings
        rt = Runtime.from_settings(settings, worker="beat")
        self.core = BeatCore(rt, Dispatcher(app, rt.keys))
        log.info(
            "beat replica %s: claims the due shards it wins among the live beats",
            self.core.name,
            extra={"action": "beat.start", "beat": self.core.name},
        )
        super().__init__(app, *args, **kwargs)

    def setup_schedule(self) -> None:
        # Nothing here: the first tick restores (a Redis or SQL failure at start is then one
        # logged tick, retried, instead of a beat that cannot start).
        return None

    def request_stop(self) -> None:
        """Ask the loop to stop; safe from a signal handler (it only sets a flag)."""
        self.core.stopping.set()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        # The pause happens here, on the stop flag, so a stop ends it at once; Celery's
        # Service loop does not sleep after a tick that returns 0.
        stopping = self.core.stopping
        if not stopping.is_set():
            stopping.wait(safe_tick(self.core))
        if stopping.is_set():
            # Service.start ends its loop on SystemExit and then closes us, outside any read.
            raise SystemExit(0)
        return 0.0

    def sync(self) -> None:
        return None

    def close(self) -> None:
        # Leaving at once hands our shards over on the others' next tick instead of after the
        # TTL; a Redis that is away now only means the entry expires on its own.
        with contextlib.suppress(*TRANSIENT_REDIS_ERRORS):
            self.core.leave()
        self.core.rt.close()
        self.core.stopping.close()

    @property
    def info(self) -> str:
        return f"    . due index: redis, namespace {self.core.rt.settings.namespace}"
