"""Real `hbgw beat` processes split the due-index shards evenly, and take over a stopped one's.

Each beat says on its ``/metrics`` how many shards it owns and, in the backlog gauge's labels,
which: the sets must be disjoint, cover every shard, match the assignment computed from the
live names in Redis, and differ in size by at most one.
"""

from __future__ import annotations

from pathlib import Path
from subprocess import Popen

import pytest
from support.harness import Gateway, gateway_settings, wait_until
from support.metrics_reading import free_port, scrape, value, with_name

from hbgw.procs import spawn_hbgw, stop_all
from hbgw.state.beat_registry import BeatRegistry, assign_shards

pytestmark = pytest.mark.timeout(300)

SHARDS = 12


def owned_by_each(gw: Gateway, ports: list[int]) -> list[set[int]] | None:
    """Each beat's shards once every one of ``ports`` sees exactly those beats live and its
    gauges agree with the assignment of the live names; None until then."""
    registry = BeatRegistry(gw.rt.client, gw.rt.keys, ttl_ms=int(gw.settings.beat_ttl * 1000))
    live = registry.live(gw.rt.now_ms())
    if len(live) != len(ports):
        return None
    expected = sorted(
        sorted(s for s, owner in enumerate(assign_shards(live, SHARDS)) if owner == beat)
        for beat in live
    )
    seen = []
    for port in ports:
        samples = scrape(f"http://127.0.0.1:{port}/metrics")
        if value(samples, "hbgw_live_beats") != len(ports):
            return None
        shards = {int(dict(labels)["shard"]) for labels in with_name(samples, "hbgw_due_backlog")}
        if value(samples, "hbgw_beat_owned_shards") != len(shards):
            return None
        seen.append(shards)
    return seen if sorted(sorted(s) for s in seen) == expected else None


def test_beat_processes_split_the_shards_evenly_and_take_over_when_one_stops(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    settings = gateway_settings(tmp_path, redis_url, redis_ns, agent="echo", due_shards=SHARDS)
    gw = Gateway(settings, redis_url)
    ports = [free_port() for _ in range(3)]
    procs: list[Popen[bytes]] = []
    try:
        for i, port in enumerate(ports):
            env = {**gw.env(), "HBGW_METRICS_PORT": str(port)}
            procs.append(spawn_hbgw(["beat"], env=env, log=tmp_path / f"beat{i}.log"))

        three = wait_until(lambda: owned_by_each(gw, ports), 120, "three beats to split")
        assert sorted(len(s) for s in three) == [4, 4, 4]
        assert sorted(s for shards in three for s in shards) == list(range(SHARDS))

        stop_all(procs[:1], timeout=20)  # a clean stop: it leaves the registry at once
        two = wait_until(lambda: owned_by_each(gw, ports[1:]), 120, "two beats to take over")
        assert sorted(len(s) for s in two) == [6, 6]
        assert sorted(s for shards in two for s in shards) == list(range(SHARDS))
        assert three[0] <= two[0] | two[1]  # the stopped beat's shards have owners again
    finally:
        stop_all(procs, timeout=20)
        gw.close()
