"""One beat replica of the replicas benchmark: a separate process running real BeatCore ticks.

Built like ``beat/scheduler.py`` builds beat (a Runtime, a Dispatcher over the project's Celery
app publishing to the Redis broker, a BeatCore); beat does no SQL per fire, so the replicas
share one (empty) SQLite file, read only by the warm-up tick's restore pass. It obeys rounds
sent on its command queue: register, meet the others at the round's barrier, tick until every
due heartbeat is claimed, report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

from hbgw.beat.core import BeatCore
from hbgw.celery_app import make_celery
from hbgw.core.settings import Settings
from hbgw.state.dispatch import Dispatcher
from hbgw.state.runtime import Runtime

# Between polls of the global backlog once this beat's own shards are done: rare enough not to
# take Redis time from the replicas still claiming.
IDLE_POLL = 0.01
ROUND_DEADLINE = 300.0


class CountingBeat(BeatCore):
    """BeatCore that counts what its ticks claim: the benchmark reads it, nothing else changes."""

    claimed = 0

    def dispatch_due(self, now_ms: int, workers: list[str], *, jobs: bool = True) -> int:
        count = super().dispatch_due(now_ms, workers, jobs=jobs)
        self.claimed += count
        return count


@dataclass(frozen=True)
class Round:
    replicas: int  # how many beats take part (the barrier's parties minus the parent)
    total: int  # due heartbeats over every shard


def _run_round(core: CountingBeat, barrier: Barrier, total: int) -> dict[str, Any]:
    index = core.rt.index
    core.claimed = 0
    core.refresh_shards(core.rt.now_ms())  # registered before the barrier: all see all
    barrier.wait()  # the parent has seeded the index; every replica starts now
    cpu0, start = time.process_time(), time.monotonic()
    end, cpu_end, ticks, shards = start, cpu0, 0, list(core.own_shards)
    while time.monotonic() - start < ROUND_DEADLINE:
        before = core.claimed
        core.tick()
        ticks += 1
        if core.claimed > before:
            # Up to its last claim: the ticks of a beat done with its shards and waiting for
            # the others are the harness's wait, not the cost of claiming.
            end, cpu_end = time.monotonic(), time.process_time()
            # The split it claimed with. A replica that is done stops ticking, and one beat TTL
            # later a slower one's next tick finds it stale and takes its (claimed) shards.
            shards = list(core.own_shards)
        elif sum(index.backlog(core.rt.now_ms()).values()) == 0:
            break  # every shard is claimed, by this replica or another
        else:
            time.sleep(IDLE_POLL)
    return {
        "name": core.name,
        "own_shards": shards,
        "claimed": core.claimed,
        "ticks": ticks,
        "start": start,
        "end": end,
        "cpu_s": round(cpu_end - cpu0, 4),
        "cpu_s_waiting_included": round(time.process_time() - cpu0, 4),
        "expected_total": total,
    }


def beat_replica(
    settings_values: dict[str, Any],
    name: str,
    commands: Queue[Round | None],
    results: Queue[dict[str, Any]],
    barriers: dict[int, Barrier],
) -> None:
    """Process entry point (spawn): serve rounds until told to stop with None."""
    settings = Settings(**settings_values)
    rt = Runtime.from_settings(settings, worker="beat")
    assert settings.redis_url is not None
    app = make_celery(settings, settings.redis_url)
    core = CountingBeat(rt, Dispatcher(app, rt.keys), name=name)
    try:
        # Warm-up: the first tick's restore pass (over an empty SQL store), connections, scripts.
        core.tick()
        results.put({"ready": name})
        while (command := commands.get()) is not None:
            results.put(_run_round(core, barriers[command.replicas], command.total))
    finally:
        rt.close()
