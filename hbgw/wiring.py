"""Assemble one gateway worker: Celery app, runtime, turn runner, registry heartbeat."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hbgw.celery_app import make_celery
from hbgw.core.settings import Settings
from hbgw.gateway.channels import make_channel
from hbgw.gateway.platforms.served import Served
from hbgw.sessions.quotas import quotas_from_settings
from hbgw.state.dispatch import Dispatcher, context_of
from hbgw.state.ownership import RegistryHeartbeat, claim_name
from hbgw.state.runtime import Runtime, resolve_redis_url
from hbgw.workers.agents import make_agent
from hbgw.workers.runner import TurnRunner


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
    # The agent first: a configuration error stops here, before a connection is opened.
    agent = make_agent(settings)
    Served.from_settings(settings)  # HBGW_PLATFORMS naming a platform without its settings
    app = make_celery(settings, resolve_redis_url(settings))
    rt = Runtime.from_settings(
        settings, worker=name, turns=threads, quotas=quotas_from_settings(settings)
    )
    try:
        claim_name(rt.registry, name, rt.now_ms)  # two live workers never share a name
    except BaseException:
        rt.close()
        raise
    channel = make_channel(
        settings, clock=rt.clock, webhooks=rt.store.webhooks, secrets=rt.store.secrets
    )
    runner = TurnRunner(rt, Dispatcher(app, rt.keys), agent=agent, channel=channel, threads=threads)
    context_of(app).handler = runner
    refresh_every = max(settings.worker_ttl / 4, 0.2)
    progress = context_of(app).consumer
    # A loop pass at least every second or two (BRPOP times out each second); two TTLs of
    # silence is a hung consumer, not a busy machine. A lost connection counts at once.
    silent_after = 2 * settings.worker_ttl
    registry = RegistryHeartbeat(
        rt.registry,
        name,
        rt.now_ms,
        every=refresh_every,
        consuming=lambda: progress.consuming(time.monotonic(), silent_after),
    )
    registry.start()
    try:
        yield WorkerParts(app, rt, runner)
    finally:
        registry.stop()
        runner.shutdown(wait=True)
        channel.close()  # after the last turn: no send is left to use the platform clients
        close_agent = getattr(agent, "close", None)  # the model loop's connections, if any
        if callable(close_agent):
            close_agent()
        rt.close()
